"""The flusher thread that writes the results waiting in journals over Python's storage
(``fxpay._later._Later``), seen through a journal of its own: one that records when the
flusher asks it to write, and how often the flusher looks it up (its hash).

- a result waits :data:`RESULT_DELAY` for others to join its commit before it is written;
- between turns the flusher sleeps: it is woken by a result or by a retry falling due, and
  does not poll (a journal whose commit failed is looked up a handful of times while its
  retry is not due, not every ``RESULT_DELAY``);
- after the exit's flush nothing is tried again.

(Issue 55's mutation run of ``_later.py``: the gathering sleep dropped, and three ways of
polling in place of a timed wait, survived every other test.)
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

from fxpay._later import RESULT_DELAY, RETRY_DELAY, _Later


class Recorder:
    """A journal as the flusher sees it: ``_flush_results`` (when it was asked to write) and
    a hash that counts the flusher's look-ups. ``refuse`` commits fail first (each asks for a
    retry, as a journal whose server refused does)."""

    def __init__(self, refuse: int = 0) -> None:
        self.refuse = refuse
        self.asked: list[float] = []
        self.hashes = 0
        self.written = threading.Event()

    def __hash__(self) -> int:
        self.hashes += 1
        return id(self) >> 4

    def _flush_results(self) -> None:
        self.asked.append(time.monotonic())
        if self.refuse:
            self.refuse -= 1
            self.hashes = 0  # counted from the retry on
            _Later.retry(self)
            return
        self.written.set()


def test_a_result_waits_for_others_to_join_its_commit_before_it_is_written() -> None:
    journal = Recorder()
    woken = time.monotonic()
    _Later.wake(journal)
    assert journal.written.wait(5), "the flusher never wrote the result"
    assert journal.asked[0] - woken >= RESULT_DELAY, (
        f"written {journal.asked[0] - woken:.4f} s after the wake: the results of other calls had no {RESULT_DELAY} s to join the commit"
    )


def test_while_a_retry_is_not_due_the_flusher_sleeps_and_does_not_poll() -> None:
    journal = Recorder(refuse=1)
    _Later.wake(journal)
    assert journal.written.wait(5), "the refused result was never tried again"
    first, second = journal.asked
    assert second - first >= RETRY_DELAY, f"tried again after {second - first:.3f} s"
    # From the retry to the write, 7 look-ups: the retry's own two, the turn that finds it not
    # due and waits (two), the turn that writes it (three); one turn more if something else
    # woke the flusher meanwhile. A flusher polling every RESULT_DELAY instead of waiting
    # looks it up twice on each of its ~10 turns.
    assert journal.hashes <= 11, f"the flusher looked the journal up {journal.hashes} times"
    flusher = _Later.flusher
    assert flusher is not None
    time.sleep(3 * RESULT_DELAY)
    assert flusher.is_alive(), "the flusher thread ended once it had nothing to write"
    assert _Later.flusher is flusher


def test_after_the_exits_flush_a_refused_commit_is_not_tried_again() -> None:
    # In a process of its own: `exiting` is the process's last state.
    code = textwrap.dedent(
        """
        from fxpay._later import _Later

        class Journal:
            def _flush_results(self):
                raise AssertionError("written after the exit's flush")

        journal = Journal()
        _Later.exiting = True
        _Later.retry(journal)
        print(len(_Later.waiting), journal in _Later.not_before, _Later.flusher is None)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["0", "False", "True"], out.stdout + out.stderr
