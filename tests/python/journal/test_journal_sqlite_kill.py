"""SIGKILL in the middle of a commit, for SqliteJournal's storage in Rust: a process making
keyed calls with several threads is killed at varied moments (its group commit, its results
riding the next commit, its requests in flight), and each time the file is whole and keeps
every key the process had been answered for.

After each kill, from fresh processes: ``PRAGMA integrity_check`` is ``ok`` (Python's
``sqlite3``, in a process of its own: sqlite_elsewhere.py says why never in a process that
uses the journal), the journal opens with fxpay, every key the child reported as returned
reads ``done`` (or ``pending``/``unknown``, its result not yet committed at the kill: never
absent, never ``released``), and no key of the file reads anything but ``pending``,
``unknown`` or ``done``."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import fxpay

ROUNDS = 15
THREADS = 4

#: The child: THREADS threads making keyed calls in a loop, each key written to stdout once its
#: call returned (a whole line per write).
CALLS = textwrap.dedent(
    """
    import os, sys, threading, time
    import fxpay
    path, base, cid, secret, name = sys.argv[1:6]
    c = fxpay.Client(cid, secret, base_url=base, journal=fxpay.SqliteJournal(path))

    def work(t):
        i = 0
        while True:
            key = f"{name}-t{t}-{i}"
            c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key=key)
            os.write(1, (key + "\\n").encode())
            i += 1

    for t in range(int(sys.argv[6])):
        threading.Thread(target=work, args=(t,), daemon=True).start()
    time.sleep(3600)
    """
)

#: Every key's state as fxpay reads it, in a fresh process (the journal opened anew).
READ = textwrap.dedent(
    """
    import json, sys
    import fxpay
    j = fxpay.SqliteJournal(sys.argv[1])
    keys = json.loads(sys.stdin.read())
    print(json.dumps({k: getattr(j.get(k), "state", None) for k in keys}))
    """
)

#: The file as Python's sqlite3 sees it, in a process that never opens it with fxpay.
INSPECT = textwrap.dedent(
    """
    import json, sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
    check = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    rows = dict(conn.execute("SELECT key, state FROM fxpay_journal"))
    conn.close()
    print(json.dumps({"integrity": check, "rows": rows}))
    """
)


def _run(script: Path, *args: str, stdin: str = "") -> Any:
    p = subprocess.run([sys.executable, str(script), *args], input=stdin, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def _kill_while_calling(calls: Path, args: list[str], name: str, delay: float) -> list[str]:
    """Starts the child, waits until it reports a call returned, kills it ``delay`` seconds
    later with SIGKILL; every key it reported before it died."""
    p = subprocess.Popen([sys.executable, str(calls), *args, name, str(THREADS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None
    reported: list[str] = []
    first = threading.Event()

    def read() -> None:
        assert p.stdout is not None
        for line in p.stdout:  # until EOF: the lines written before the kill
            reported.append(line.decode().strip())
            first.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not first.wait(60):
            p.kill()
            raise AssertionError(f"the child made no call in 60 s: {p.stderr.read().decode()[-3000:] if p.stderr else ''}")
        time.sleep(delay)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
        reader.join(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if p.stderr is not None:
            p.stderr.close()
    assert p.returncode == -signal.SIGKILL, p.returncode
    assert not reader.is_alive()
    return reported


def test_a_process_killed_during_its_commits_leaves_a_whole_file_and_every_returned_key(fxpay_sandbox: Any, tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    fxpay.SqliteJournal(path)  # made complete before the children open it
    scripts = {}
    for name, text in (("calls", CALLS), ("read", READ), ("inspect", INSPECT)):
        scripts[name] = tmp_path / f"killed_{name}.py"  # never a module name of its own (inspect)
        scripts[name].write_text(text)
    args = [str(path), fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret]
    rng = random.Random(5566)
    returned_total = 0
    for n in range(ROUNDS):
        # From the first answer to a few commits later: in the group commit, between a claim
        # and its result's commit, with results waiting for the flusher (50 ms).
        delay = rng.uniform(0.0, 0.25)
        reported = _kill_while_calling(scripts["calls"], args, f"r{n}", delay)
        assert reported, f"round {n}: no call returned before the kill"
        returned_total += len(reported)
        seen = _run(scripts["inspect"], str(path))
        assert seen["integrity"] == ["ok"], (n, delay, seen["integrity"])
        keys = sorted(set(seen["rows"]) | set(reported))
        states = _run(scripts["read"], str(path), stdin=json.dumps(keys))
        lost = {k: states[k] for k in reported if states[k] not in ("done", "pending", "unknown")}
        assert not lost, f"round {n} (killed {delay:.3f} s after the first answer): keys returned before the kill read {lost}"
        odd = {k: s for k, s in states.items() if s not in ("done", "pending", "unknown", None)}
        assert not odd, f"round {n}: {odd}"
        assert {k for k, s in states.items() if s is not None} == set(seen["rows"]), (n, "fxpay and sqlite3 see other keys")
    assert returned_total >= ROUNDS
