"""16 threads share one Client (issue 25): the test free-threaded CPython needs, run on every
interpreter (3.11 and 3.13 here; 3.14t where it exists). 5,000 calls in all, in 10 rounds;
between rounds the sandbox's clock jumps an hour, so every token it gave expires under the
client and the next calls of all 16 threads meet a 401 together (the client renews its token
once and replays, the session refreshes once). Models are handed from thread to thread, and a
cassette records. 0 errors; the counts are printed.

(The clock jumps only between rounds: a jump while a call is replaying after its one renewal
would make that call's 401 final, as documented.)"""

from __future__ import annotations

import json
import queue
import sys
import sysconfig
import threading
from collections import Counter
from pathlib import Path

import fxpay
from fxpay.testing import Cassette, Sandbox

from conftest import login

THREADS = 16
CALLS = 5000
ROUNDS = 10


def test_16_threads_share_one_client_with_renewals_a_session_and_a_cassette(tmp_path: Path) -> None:
    path = tmp_path / "stress.json"
    counts: Counter[str] = Counter()
    errors: list[BaseException] = []
    handed: queue.Queue[fxpay.Quote] = queue.Queue()
    tokens: list[fxpay.Token] = []
    lock = threading.Lock()
    with Sandbox() as sb:
        cassette = Cassette(str(path), mode="record")
        with sb.client(cassette=cassette) as c:
            qid = c.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
            session = c.user_session(c.exchange_code(*login(sb, c)), on_token=tokens.append)
            renewals_before = sb.stats()["token_requests"]
            jumps: list[int] = []

            def jump() -> None:
                sb.advance(3600)  # every token the sandbox gave is now expired
                jumps.append(1)

            barrier = threading.Barrier(THREADS, action=jump)

            def worker(n: int) -> None:
                mine: Counter[str] = Counter()
                try:
                    for i in range(n):
                        if i % (n // ROUNDS) == 0 and i // (n // ROUNDS) < ROUNDS:
                            barrier.wait(120)
                        if i % 10 == 0:
                            assert session.list_virtual_accounts()
                            mine["session calls"] += 1
                        else:
                            q = c.get_quote(qid)
                            assert q.id == qid
                            handed.put(q)
                            mine["quote calls"] += 1
                            try:
                                other = handed.get_nowait()  # made on some other thread
                            except queue.Empty:
                                continue
                            assert other.id == qid
                            assert other == fxpay.Quote(**{k: getattr(other, k) for k in fxpay.Quote.__match_args__})
                            assert hash(other) == hash(q) or other != q
                            mine["models crossed"] += 1
                except BaseException as e:  # reported below
                    errors.append(e)
                with lock:
                    counts.update(mine)

            per = [CALLS // THREADS + (1 if t < CALLS % THREADS else 0) for t in range(THREADS)]
            threads = [threading.Thread(target=worker, args=(n,)) for n in per]
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
            assert not any(t.is_alive() for t in threads), "a thread did not finish"
            counts["clock jumps"] = len(jumps)
            counts["token requests"] = sb.stats()["token_requests"] - renewals_before
            counts["session refreshes (on_token)"] = len(tokens)
    recorded = len(json.loads(path.read_text())["interactions"])
    counts["cassette interactions"] = recorded
    gil = "free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else "with the GIL"
    print(f"\n{sys.version.split()[0]} ({gil}): {THREADS} threads, {dict(sorted(counts.items()))}, errors: {len(errors)}")
    assert not errors, f"{len(errors)} errors; the first: {errors[0]!r}"
    assert counts["quote calls"] + counts["session calls"] == CALLS
    assert counts["clock jumps"] == ROUNDS
    assert counts["token requests"] >= ROUNDS - 1
    assert counts["session refreshes (on_token)"] >= ROUNDS - 1
    assert counts["models crossed"] > 0
    assert recorded >= CALLS
