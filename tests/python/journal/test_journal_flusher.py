"""The flusher thread that writes the results waiting in journals over Python's storage
(``fxpay._later._Later``), seen through a journal of its own: one that records when the
flusher asks it to write, and how often the flusher looks it up (its hash).

- a result waits :data:`RESULT_DELAY` for others to join its commit before it is written;
- each journal has turns of its own: written at its own delay, never at another's;
- between turns the flusher sleeps: it is woken by a result or by a retry falling due, and
  does not poll (a journal whose commit failed is looked up a handful of times while its
  retry is not due, not every ``RESULT_DELAY``), and it lives on once it has nothing to do;
- after the exit's flush nothing is tried again.

Each runs in a process of its own: the flusher is one per process, and in this one the
journals of earlier tests (one whose commits are refused for good, say) keep waking it.

(Issue 55's mutation run of ``_later.py``: the gathering sleep dropped, three ways of polling
in place of a timed wait, and a retry after the exit's flush survived every other test.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

from fxpay._later import RESULT_DELAY, RETRY_DELAY

RECORDER = """
import json, threading, time
from fxpay._later import _Later

class Recorder:
    '''A journal as the flusher sees it: `_flush_results` (when it was asked to write) and a
    hash that counts the flusher's look-ups from the first refusal on. `refuse` commits fail
    first (each asks for a retry, as a journal whose server refused does).'''

    def __init__(self, refuse=0):
        self.refuse = refuse
        self.asked = []
        self.hashes = 0
        self.written = threading.Event()

    def __hash__(self):
        self.hashes += 1
        return id(self) >> 4

    def _flush_results(self):
        self.asked.append(time.monotonic())
        if self.refuse:
            self.refuse -= 1
            self.hashes = 0
            _Later.retry(self)
            return
        self.written.set()
"""


def run(scenario: str) -> Any:
    """Runs ``scenario`` (after :data:`RECORDER`) in a new interpreter; what it printed, as JSON."""
    code = RECORDER + textwrap.dedent(scenario)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def test_a_result_waits_for_others_to_join_its_commit_before_it_is_written() -> None:
    got = run(
        """
        journal = Recorder()
        woken = time.monotonic()
        _Later.wake(journal)
        written = journal.written.wait(5)
        after = journal.asked[0] - woken
        # A journal whose commit was once refused and then written: its retry is past, and
        # its next result waits its whole delay too.
        retried = Recorder(refuse=1)
        _Later.wake(retried)
        retried.written.wait(5)
        retried.written.clear()
        woken = time.monotonic()
        _Later.wake(retried)
        again = retried.written.wait(5)
        print(json.dumps({"written": written and again, "after": after, "again": retried.asked[-1] - woken}))
        """
    )
    assert got["written"], "the flusher never wrote the result"
    for after in (got["after"], got["again"]):
        assert after >= RESULT_DELAY, (
            f"written {after:.4f} s after the wake: other calls' results had no {RESULT_DELAY} s to join the commit"
        )


def test_each_journal_is_written_at_its_own_delay_never_at_anothers() -> None:
    """A journal woken while the flusher waits for another's turn gets a turn of its own:
    written a whole delay after its own wake, not when the other's falls due; a journal woken
    with a shorter delay (read at its wake) is not held by another's longer one; and a journal
    woken again while its turn is due is written once. (Found by CI: the flusher slept one
    delay from the first wake and then wrote every journal waiting, so a result kept just
    before was written at once, and one kept under a longer delay that an earlier test had
    set waited for it.)"""
    got = run(
        """
        import fxpay._later as later
        later.RESULT_DELAY = 0.5
        first, second = Recorder(), Recorder()
        t0 = time.monotonic()
        _Later.wake(first)
        time.sleep(0.4)
        t1 = time.monotonic()
        _Later.wake(second)
        _Later.wake(second)  # its turn is due by then: no second one
        turns = sum(j is second for _, j in _Later.waiting)
        second.written.wait(5)
        later.RESULT_DELAY = 30.0
        slow, quick = Recorder(), Recorder()
        _Later.wake(slow)
        later.RESULT_DELAY = 0.05
        t2 = time.monotonic()
        _Later.wake(quick)
        quick.written.wait(5)
        time.sleep(0.6)
        print(json.dumps({
            "first": [a - t0 for a in first.asked],
            "second": [a - t1 for a in second.asked],
            "quick": [a - t2 for a in quick.asked],
            "slow": len(slow.asked),
            "turns": turns,
        }))
        """
    )
    assert len(got["first"]) == 1, got
    assert got["first"][0] >= 0.5, got
    assert (len(got["second"]), got["turns"]) == (1, 1), f"woken twice while its turn was due: {got}"
    assert got["second"][0] >= 0.5, f"written {got['second'][0]:.3f} s after its wake: at the other journal's turn"
    assert len(got["quick"]) == 1, f"held by another journal's longer delay (30 s): {got}"
    assert got["slow"] == 0, "written before its own delay"


def test_while_a_retry_is_not_due_the_flusher_sleeps_and_does_not_poll() -> None:
    got = run(
        """
        journal = Recorder(refuse=1)
        _Later.wake(journal)
        written = journal.written.wait(5)
        flusher = _Later.flusher
        time.sleep(0.15)
        print(json.dumps({
            "written": written,
            "asked": journal.asked,
            "hashes": journal.hashes,
            "alive": flusher.is_alive() and _Later.flusher is flusher,
        }))
        """
    )
    assert got["written"], "the refused result was never tried again"
    first, second = got["asked"]
    assert second - first >= RETRY_DELAY, f"tried again after {second - first:.3f} s"
    # From the retry to the write, 7 look-ups: the retry's own two, the turn that finds it not
    # due and waits (two), the turn that writes it (three). A flusher polling every
    # RESULT_DELAY instead of waiting looks it up twice on each of its ~10 turns.
    assert got["hashes"] <= 8, f"the flusher looked the journal up {got['hashes']} times"
    assert got["alive"], "the flusher thread ended once it had nothing to write"


def test_after_the_exits_flush_a_refused_commit_is_not_tried_again() -> None:
    got = run(
        """
        journal = Recorder()
        _Later.exiting = True
        _Later.retry(journal)
        print(json.dumps([len(_Later.waiting), journal in _Later.not_before, _Later.flusher is None]))
        """
    )
    assert got == [0, False, True]
