"""fxpay.contrib.celery against real parts: a redis-server (broker, result backend and the
shared RedisJournal), two Celery prefork workers (-c 2 each, acks_late) and the sandbox over
loopback.

Chaos: 2,000 rows in chunks of 100; pool children SIGKILLed 5 times and one whole worker
(its process group) once during the run. Every pay reference is booked at most once, and the
gathered table holds each row once, in the table's order, as booked, replayed or unknown.
The same table sent again in chunks of another size books nothing more: keys come from the
rows, not from chunks or tasks."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import make_beneficiary, need
from journal_support import RedisServer, check_named, held_long, named_right_after, requests_to, wait_out

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the prefork pool needs fork")

APPS = Path(__file__).parent / "apps"
ROWS = 2000
CHUNK = 100
SLOW = 200


def stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


def table(bid: str, n: int, prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "key": f"{prefix}{i}",
            "buy_currency": "USD",
            "buy_amount": Decimal("10.01") + i,
            "sell_currency": "AUD",
            "beneficiary_id": bid,
            "pay_reason": "invoice",
            "pay_reference": f"{prefix.upper()}-{i}",
        }
        for i in range(n)
    ]


class Workers:
    """Celery workers of tests/python/journal/apps/payout_celery_app.py, each in its own
    process group (so that one can be killed whole)."""

    def __init__(self, sb: Any, redis: RedisServer, tmp_path: Path) -> None:
        self.env = dict(
            os.environ,
            FXPAY_BASE_URL=sb.base_url,
            FXPAY_CLIENT_ID=sb.client_id,
            FXPAY_CLIENT_SECRET=sb.client_secret,
            FXPAY_TEST_BROKER=f"redis+socket://{redis.sock}",
            FXPAY_TEST_JOURNAL=f"unix://{redis.sock}?db=1",
            PYTHONPATH=os.pathsep.join([str(APPS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        )
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []
        # The journal every worker shares, made once before any worker opens it.
        fxpay.RedisJournal(f"unix://{redis.sock}?db=1", prefix="fan:").create()

    def start(self, n: int, **env: str) -> None:
        for _ in range(n):
            w = len(self.procs)
            log = self.tmp_path / f"worker{w}.log"
            with log.open("wb") as out:
                self.procs.append(
                    subprocess.Popen(
                        [
                            *(sys.executable, "-m", "celery", "-A", "payout_celery_app", "worker", "--pool=prefork", "-c", "2"),
                            *("--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"),
                            *("-n", f"fan{w}-{os.getpid()}@127.0.0.1"),
                        ],
                        cwd=str(APPS),
                        env={**self.env, **env},
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )

    def logs(self) -> str:
        return "\n".join(p.read_text()[-3000:] for p in sorted(self.tmp_path.glob("worker*.log")))

    def stop(self) -> None:
        for p in self.procs:
            stop(p, 20)


def sender(redis: RedisServer) -> Any:
    celery = need("celery")
    app = celery.Celery("sender", broker=f"redis+socket://{redis.sock}", backend=f"redis+socket://{redis.sock}")
    app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
    return app


@contextlib.contextmanager
def running(workers: Workers, app: Any) -> Iterator[None]:
    """Closes the sending app and stops the workers at the end; an error other than a failed
    assertion fails the test with the workers' logs."""
    try:
        yield
    except Exception as e:
        if isinstance(e, (AssertionError, pytest.fail.Exception)):
            raise
        pytest.fail(f"{type(e).__name__}: {e}\n{workers.logs()}")
    finally:
        app.close()
        workers.stop()


def live_children(psutil: Any, pid: int) -> list[int]:
    """A worker's pool children that are running (a killed one lingers as a zombie until the
    worker reaps it)."""
    out = []
    for ch in psutil.Process(pid).children():
        with contextlib.suppress(psutil.NoSuchProcess):
            if ch.status() != psutil.STATUS_ZOMBIE:
                out.append(ch.pid)
    return out


def refs_booked(sb: Any) -> collections.Counter[str]:
    return collections.Counter(b["payReference"] for d in sb.deals() for b in d["beneficiaries"])


@pytest.mark.filterwarnings("ignore::fxpay.testing.UnfiredFaultWarning")
def test_celery_chaos_each_row_once_each_reference_booked_at_most_once(fxpay_sandbox: Any, redis: RedisServer, tmp_path: Path) -> None:
    need("celery")
    psutil = need("psutil")
    import fxpay.contrib.celery

    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    rows = table(bid, ROWS, "cel")
    for i in range(ROWS):
        # So that kills land mid-run, and the first in one deal's request (held 5 s) for certain.
        fxpay_sandbox.delay_next("POST /v1/payments/deals", 5.0 if i == SLOW else 0.01)
    workers = Workers(fxpay_sandbox, redis, tmp_path)
    workers.start(2)
    app = sender(redis)
    journal = fxpay.RedisJournal(f"unix://{redis.sock}?db=1", prefix="fan:")
    journal.create()
    seen: list[fxpay.PayoutProgress] = []
    kills: list[str] = []
    killed: set[int] = set()
    in_flight: list[str] = []  # the row whose deal request the first killed child was waiting on
    done = threading.Event()

    def chaos() -> None:
        # Five pool children (of whichever worker is alive), then one whole worker, each once
        # another 200 deals were booked.
        t0 = time.monotonic()
        while len(kills) < 6 and not done.is_set() and time.monotonic() - t0 < 120:
            if requests_to(fxpay_sandbox, "POST /v1/payments/deals") > SLOW + 200 * len(kills):
                if not kills:
                    children = {pid for w in workers.procs for pid in live_children(psutil, w.pid)}
                    held = held_long(journal, children, 0.3)
                    if held is not None:
                        os.kill(held[0], signal.SIGKILL)
                        killed.add(held[0])
                        kills.append(f"child {held[0]}")
                        in_flight.append(held[1])
                elif len(kills) < 5:
                    alive = [p for p in workers.procs if p.poll() is None]
                    # A child killed before may linger as a zombie until its worker reaps it.
                    victims = [pid for pid in live_children(psutil, alive[len(kills) % len(alive)].pid) if pid not in killed]
                    if victims:
                        os.kill(victims[0], signal.SIGKILL)
                        killed.add(victims[0])
                        kills.append(f"child {victims[0]}")
                else:
                    os.killpg(workers.procs[1].pid, signal.SIGKILL)
                    kills.append(f"worker {workers.procs[1].pid}")
            time.sleep(0.01)

    killer = threading.Thread(target=chaos)
    t0 = time.monotonic()
    try:
        killer.start()
        out = fxpay.contrib.celery.pay_out_celery(
            app, rows, funding_source="Own account", chunk_size=CHUNK, progress=seen.append, journal=journal, timeout=600, poll=0.2
        )
        took = time.monotonic() - t0
        named, leased, read_at = named_right_after(journal, [r["key"] for r in rows])
        done.set()
        killer.join()
        # The same table again, in chunks of another size: every row replays or stays unknown.
        again = fxpay.contrib.celery.pay_out_celery(app, rows, funding_source="Own account", chunk_size=150, timeout=120)
    except Exception as e:
        pytest.fail(f"{type(e).__name__}: {e}\n{workers.logs()}")
    finally:
        done.set()
        app.close()
        workers.stop()
    refs = refs_booked(fxpay_sandbox)
    counts = collections.Counter(r["status"] for r in out)
    print(f"\n{ROWS} rows, chunks of {CHUNK}, {took:.1f} s; kills: {kills}; statuses {dict(counts)}; deals booked {sum(refs.values())}")
    assert len(kills) == 6, kills
    assert max(refs.values()) == 1  # no payment booked twice
    # Each row once, in the table's order, with its own fields, as booked, replayed or unknown.
    assert [r["key"] for r in out] == [r["key"] for r in rows]
    assert [r["buy_amount"] for r in out] == [r["buy_amount"] for r in rows]
    assert set(counts) <= {"booked", "replayed", "unknown"}, counts
    for r in out:
        if r["status"] in ("booked", "replayed"):
            assert refs[r["pay_reference"]] == 1, r
            assert isinstance(r["sell_amount"], Decimal), r
            assert r["deal_id"], r
    assert counts["booked"] + counts["replayed"] <= sum(refs.values())
    # The journal's view of the run agrees with the rows' own word on what was booked.
    # (A row whose worker died mid-deal may be booked while its entry is not done: unknown.)
    p = journal.payout_progress([r["key"] for r in rows])
    assert counts["booked"] + counts["replayed"] <= p.booked <= sum(refs.values()), p
    # Right after the run, the journal names every row that came back unknown: journal.unknown()
    # or journal.leased(keys) (a row a killed child held: pending until its lease lapses).
    out_unknown = {r["key"] for r in out if r["status"] == "unknown"}
    print(f"unknown rows {len(out_unknown)}; named right after the run {len(named)}, of which leased {len(leased)}")
    assert in_flight, kills
    assert in_flight[0] in out_unknown, (in_flight, out_unknown)
    check_named(out_unknown, named, leased, read_at)
    # Once the leases have lapsed (the docs' reconcile loop waits for them), unknown() lists them.
    wait_out(leased)
    assert out_unknown <= {e.key.rsplit("/", 1)[0] for e in journal.unknown()}
    assert seen, "no progress reported"
    assert (seen[-1].done, seen[-1].total) == (ROWS, ROWS), seen[-1]
    # The last report is the table returned, counted (the journal may count a row a killed child
    # booked as booked, where its chunk's redelivery returned it replayed).
    assert seen[-1] == fxpay.PayoutProgress(ROWS, ROWS, counts["booked"], counts["replayed"], counts["unknown"], counts["refused"])
    # Resumed in chunks of 150: nothing booked again.
    assert [r["key"] for r in again] == [r["key"] for r in rows]
    assert set(collections.Counter(r["status"] for r in again)) <= {"replayed", "unknown"}
    assert sum(refs_booked(fxpay_sandbox).values()) == sum(refs.values())


def test_a_chunk_the_broker_lost_is_sent_again(
    fxpay_sandbox: Any, redis: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker killed whole after the Redis broker handed it a chunk (BRPOP took it off the
    queue) and before it recorded the chunk unacknowledged loses that chunk: no queue, no
    visibility timeout brings it back. Made certain here: a worker is stopped (SIGSTOP)
    inside its wait on the queue, a second worker waits behind it (Redis serves the first
    waiter first), the table is sent (its first chunk goes into the stopped worker's socket,
    the others to the second worker), and the stopped worker is killed. Once nothing has
    moved for lost_after, the lost chunk, and only it, is sent again, and the table comes back
    whole, each reference booked once."""
    redis_py = need("redis")
    import fxpay.contrib.celery

    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    workers = Workers(fxpay_sandbox, redis, tmp_path)
    workers.start(1, FXPAY_TEST_BROKER_WAIT="60")
    app = sender(redis)
    journal = fxpay.RedisJournal(f"unix://{redis.sock}?db=1", prefix="fan:")
    broker = redis_py.Redis(unix_socket_path=str(redis.sock), db=0)

    def waiting() -> set[str]:
        """The broker's clients blocked in a wait on the queue (BRPOP), by id."""
        return {cl["id"] for cl in broker.client_list() if cl.get("cmd") == "brpop" and "b" in cl.get("flags", "")}

    def until(what: str, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline, what
            time.sleep(0.01)

    rows = table(bid, 12, "lost")
    got: list[Any] = []
    with running(workers, app):
        # The worker is up, has paid (its client made) and waits on the queue again.
        warm = fxpay.contrib.celery.pay_out_celery(app, table(bid, 1, "warm"), funding_source="Own account", timeout=60)
        assert [r["status"] for r in warm] == ["booked"]
        until("the worker never waited on the queue", lambda: len(waiting()) == 1)
        (stopped,) = waiting()
        os.killpg(workers.procs[0].pid, signal.SIGSTOP)  # inside a wait that lasts 60 s
        workers.start(1)
        until("the second worker never waited behind the stopped one", lambda: len(waiting()) == 2)
        assert stopped in waiting()
        caplog.set_level(logging.WARNING, logger="fxpay.payouts")
        sender_thread = threading.Thread(
            target=lambda: got.append(
                fxpay.contrib.celery.pay_out_celery(
                    app, rows, funding_source="Own account", chunk_size=4, journal=journal, timeout=90, poll=0.1, lost_after=3
                )
            )
        )
        sender_thread.start()
        until("the stopped worker was handed no chunk", lambda: stopped not in waiting())
        os.killpg(workers.procs[0].pid, signal.SIGKILL)
        workers.procs[0].wait(10)
        sender_thread.join(120)
        assert not sender_thread.is_alive()
    assert got, f"pay_out_celery raised: see the log\n{workers.logs()}"
    out = got[0]
    resent = [r.getMessage() for r in caplog.records if r.name == "fxpay.payouts"]
    print(f"\n{resent}")
    assert len(resent) == 1, resent
    assert "chunk 0 of 3" in resent[0], resent
    assert [r["key"] for r in out] == [r["key"] for r in rows]
    assert [r["status"] for r in out] == ["booked"] * 12, out
    refs = refs_booked(fxpay_sandbox)
    assert all(refs[r["pay_reference"]] == 1 for r in rows), refs


def test_timeout_bounds_the_whole_wait_and_a_chunk_never_taken_is_sent_again_ever_more_slowly(
    redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """No worker runs, so the chunk never comes back. pay_out_celery(timeout=) is one bound
    for following the journal and gathering the results together (it was one for each).
    Meanwhile the chunk, never started, is sent again after 0.5 s of stillness, then after
    1 s, then 2 s: three times in the 3 s."""
    need("celery")
    from celery.exceptions import TimeoutError as CeleryTimeoutError

    import fxpay.contrib.celery

    app = sender(redis)
    journal = fxpay.RedisJournal(f"unix://{redis.sock}?db=1", prefix="late:")
    journal.create()
    seen: list[fxpay.PayoutProgress] = []
    caplog.set_level(logging.WARNING, logger="fxpay.payouts")
    try:
        t0 = time.monotonic()
        with pytest.raises(CeleryTimeoutError, match="1 of 1 chunks did not come back"):
            fxpay.contrib.celery.pay_out_celery(
                app, table("b-1", 1, "late"), funding_source="Own account", timeout=3, journal=journal, progress=seen.append,
                poll=0.05, lost_after=0.5,
            )  # fmt: skip
        took = time.monotonic() - t0
    finally:
        app.close()
    assert 3 <= took < 5.5, took
    assert seen, "no progress reported"
    assert seen[-1] == fxpay.PayoutProgress(0, 1, 0, 0, 0, 0), seen[-1]
    resent = [r.getMessage() for r in caplog.records if r.name == "fxpay.payouts"]
    assert len(resent) == 3, resent
    assert all("chunk 0 of 1" in m for m in resent), resent
    stillness = [float(m.split(" had not started after ")[1].split(" s ")[0]) for m in resent]
    # Each after twice the stillness of the one before (a stalled poll may only make it later).
    assert [s >= 0.5 * 2**k for k, s in enumerate(stillness)] == [True] * 3, stillness


def test_pay_out_celery_keeps_the_tables_kind_and_order(fxpay_sandbox: Any, redis: RedisServer, tmp_path: Path) -> None:
    """A pandas and a polars DataFrame come back as DataFrames of their library, in their
    order, with sell_amount an exact Decimal; bad arguments are refused before anything is sent."""
    pd = need("pandas")
    pl = need("polars")
    import fxpay.contrib.celery

    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    workers = Workers(fxpay_sandbox, redis, tmp_path)
    workers.start(1)
    app = sender(redis)
    with running(workers, app):
        frame = pd.DataFrame(table(bid, 25, "pd"))
        seen: list[fxpay.PayoutProgress] = []
        out = fxpay.contrib.celery.pay_out_celery(
            app, frame, funding_source="Own account", chunk_size=7, timeout=60, progress=seen.append, poll=0.05
        )
        # Without a journal, the counts move as whole chunks come back.
        assert seen[-1] == fxpay.PayoutProgress(done=25, total=25, booked=25, replayed=0, unknown=0, refused=0)
        assert {p.done for p in seen} <= {0, 7, 14, 21, 4, 11, 18, 25}, seen
        assert isinstance(out, pd.DataFrame)
        assert out["key"].tolist() == frame["key"].tolist()
        assert set(out["status"]) == {"booked"}
        assert all(isinstance(v, Decimal) for v in out["sell_amount"])
        polars = pl.DataFrame(table(bid, 9, "pl")).with_columns(pl.col("buy_amount").cast(pl.Utf8))
        got = fxpay.contrib.celery.pay_out_celery(app, polars, funding_source="Own account", chunk_size=4, timeout=60)
        assert isinstance(got, pl.DataFrame)
        assert got["key"].to_list() == polars["key"].to_list()
        assert set(got["status"].to_list()) == {"booked"}
        gen = (r for r in table(bid, 5, "gen"))
        listed = fxpay.contrib.celery.pay_out_celery(app, gen, funding_source="Own account", chunk_size=2, timeout=60)
        assert [r["key"] for r in listed] == [f"gen{i}" for i in range(5)]
        assert [r["status"] for r in listed] == ["booked"] * 5
        deals = len(fxpay_sandbox.deals())
        # A chunk whose task failed: its rows come back unknown with the task's error.
        failed = fxpay.contrib.celery.pay_out_celery(
            app, table(bid, 3, "brk"), funding_source="Own account", chunk_size=2, timeout=60, task_name="test.broken_chunk"
        )
        assert [r["status"] for r in failed] == ["unknown"] * 3
        assert all("no client today" in r["error"] for r in failed), failed
        dup = table(bid, 3, "dup")
        dup[2]["key"] = "dup0"
        with pytest.raises(fxpay.InvalidRequestError, match="not unique"):
            fxpay.contrib.celery.pay_out_celery(app, dup, funding_source="Own account")
        with pytest.raises(fxpay.InvalidRequestError, match="key"):
            fxpay.contrib.celery.pay_out_celery(app, [{"buy_amount": "1"}], funding_source="Own account")
        with pytest.raises(TypeError, match="chunk_size"):
            fxpay.contrib.celery.pay_out_celery(app, [], funding_source="Own account", chunk_size="10")  # type: ignore[arg-type]
        with pytest.raises(fxpay.InvalidRequestError, match="chunk_size"):
            fxpay.contrib.celery.pay_out_celery(app, [], funding_source="Own account", chunk_size=0)
        with pytest.raises(fxpay.ConfigurationError, match="max_rate"):
            fxpay.contrib.celery.pay_out_celery(app, dup[:1], funding_source="Own account", max_rate=-1)
        with pytest.raises(TypeError, match="concurrency"):
            fxpay.contrib.celery.pay_out_celery(app, dup[:1], funding_source="Own account", concurrency=2.5)  # type: ignore[arg-type]
        with pytest.raises(fxpay.InvalidRequestError, match="poll"):
            fxpay.contrib.celery.pay_out_celery(app, dup[:1], funding_source="Own account", poll=0)
        with pytest.raises(TypeError, match="beneficiary"):
            fxpay.contrib.celery.pay_out_celery(app, [{**dup[0], "beneficiary": make_beneficiary()}], funding_source="Own account")
        invalid = fxpay.InvalidRequestError
        bad_seconds = (("timeout", "60", TypeError), ("timeout", 0, invalid), ("lost_after", -1, invalid))
        for name, bad, error in bad_seconds:
            with pytest.raises(error, match=name):
                fxpay.contrib.celery.pay_out_celery(app, dup[:1], funding_source="Own account", **{name: bad})
        with pytest.raises(TypeError, match="lost_after"):
            fxpay.contrib.celery.pay_out_celery(app, dup[:1], funding_source="Own account", lost_after=True)
        assert len(fxpay_sandbox.deals()) == deals


def _last_line(err: str) -> str:
    return err.rstrip("\n").replace("\n", "\r").split("\r")[-1]


def _summary(out: list[dict[str, Any]]) -> dict[str, int]:
    counts = collections.Counter(r["status"] for r in out)
    return {s: counts[s] for s in ("booked", "replayed", "unknown", "refused")}


def test_the_fan_out_bars_last_line_is_the_summary_returned(
    fxpay_sandbox: Any, redis: RedisServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """progress=True with journal=: the bar follows the journal's counts while the workers
    pay; its last line is the table returned, counted (the rows' own word), even where the
    journal counted otherwise: a chunk whose task failed leaves nothing in the journal, and
    its rows come back unknown."""
    need("tqdm")
    import fxpay.contrib.celery

    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    workers = Workers(fxpay_sandbox, redis, tmp_path)
    workers.start(1)
    app = sender(redis)
    journal = fxpay.RedisJournal(f"unix://{redis.sock}?db=1", prefix="fan:")
    try:
        for name, n, task in (("bar", 25, fxpay.contrib.celery.TASK_NAME), ("brk", 5, "test.broken_chunk")):
            capfd.readouterr()
            out = fxpay.contrib.celery.pay_out_celery(
                app, table(bid, n, name), funding_source="Own account", chunk_size=4, timeout=60, progress=True, journal=journal,
                poll=0.05, task_name=task,
            )  # fmt: skip
            line = _last_line(capfd.readouterr().err)
            summary = _summary(out)
            print(f"\n{name}: {line!r}; summary {summary}")
            assert f"{n}/{n}" in line, line
            for status, count in summary.items():
                assert f"{status}={count}" in line, (line, summary)
    finally:
        app.close()
        workers.stop()
