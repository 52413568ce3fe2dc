"""The receivers call on_event at most once per processId: repeats, concurrent deliveries,
failures, the seen-sets (memory and Redis), the ref lookup of the race-free pattern, and two
receiver processes sharing one RedisSeenSet."""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import fxpay
from fxpay.seen import DEFAULT_TTL, MemorySeenSet, RedisSeenSet, SeenSet

import webhook_support as tw
from conftest import all_at_once, need
from receiver_support import new_prefix, redis_server, serve, wait_for
from webhook_support import DID, NONCE, OTHER_PID, PID, dumps, fail, success

OTHER_DID = "d15ea5e0-0000-4abc-8def-0123456789ab"
REF = "order-1042"


class Gate:
    """on_event that blocks until the test opens the gate, so deliveries really overlap."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()

    def __call__(self, rec: tw.Recorder, ev: fxpay.DealCreated) -> None:
        self.entered.set()
        assert self.open.wait(30), "the test never opened the gate"
        rec.record(ev)


class Failing(SeenSet):
    """A seen-set whose claim or commit raises (Redis down)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.inner = MemorySeenSet()

    def claim(self, key: str) -> Any:
        if self.where == "claim":
            raise ConnectionError("redis is down")
        return self.inner.claim(key)

    def commit(self, key: str) -> None:
        if self.where == "commit":
            raise ConnectionError("redis is down")
        self.inner.commit(key)

    def release(self, key: str) -> None:
        self.inner.release(key)


class AsyncSeen:
    """A seen-set whose methods are coroutine functions."""

    def __init__(self) -> None:
        self.inner = MemorySeenSet()

    async def claim(self, key: str) -> Any:
        return self.inner.claim(key)

    async def commit(self, key: str) -> None:
        self.inner.commit(key)

    async def release(self, key: str) -> None:
        self.inner.release(key)


class AwaitableLookup:
    """A lookup whose ``__call__`` is a coroutine function: the object itself is a plain
    callable that returns an awaitable (as a lambda around an async lookup does)."""

    def __init__(self, rec: tw.Recorder) -> None:
        self.rec = rec

    async def __call__(self, process_id: str) -> str | None:
        return await self.rec.nonce_for_async(process_id)


class AwaitableHandler:
    """An on_event whose ``__call__`` is a coroutine function."""

    def __init__(self, rec: tw.Recorder) -> None:
        self.rec = rec

    async def __call__(self, ev: fxpay.DealCreated) -> None:
        await self.rec.record_async(ev)


class Bogus(MemorySeenSet):
    def claim(self, key: str) -> Any:
        super().claim(key)
        return True


def closed_redis_url() -> str:
    """The URL of a Redis that is down: a loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    return f"redis://127.0.0.1:{port}/0"


class App:
    def __init__(self) -> None:
        self.rec = tw.Recorder()
        self.gate = Gate()
        self.failures_left = 1
        self.with_ref: list[tuple[str, str]] = []
        self.refs = {REF: NONCE}

    def fail_once(self, ev: fxpay.DealCreated) -> None:
        with self.rec.lock:
            if self.failures_left:
                self.failures_left -= 1
                raise RuntimeError("database is restarting")
        self.rec.record(ev)

    def on_ref_event(self, ev: fxpay.DealCreated, ref: str) -> None:
        with self.rec.lock:
            self.with_ref.append((ev.process_id, ref))

    def ref_lookup_explodes(self, ref: str) -> str:
        raise RuntimeError("db down")

    def routes(self, _rec: Any) -> list[tuple[str, dict[str, Any]]]:
        rec = self.rec
        return [
            ("/once", {"nonce_for": rec.nonce_for, "on_event": rec.record}),
            ("/once-async", {"nonce_for": rec.nonce_for_async, "on_event": rec.record_async}),
            ("/once-awaitable", {"nonce_for": AwaitableLookup(rec), "on_event": AwaitableHandler(rec)}),
            ("/fixed-once", {"nonce": NONCE, "on_event": rec.record}),
            ("/gated", {"nonce": NONCE, "on_event": lambda ev: self.gate(rec, ev)}),
            ("/fail-once", {"nonce": NONCE, "on_event": self.fail_once}),
            ("/async-seen", {"nonce": NONCE, "on_event": self.fail_once, "seen": AsyncSeen()}),
            ("/bogus-seen", {"nonce": NONCE, "on_event": rec.record, "seen": Bogus()}),
            ("/claim-down", {"nonce": NONCE, "on_event": rec.record, "seen": Failing("claim")}),
            ("/commit-down", {"nonce": NONCE, "on_event": rec.record, "seen": Failing("commit")}),
            ("/by-ref", {"nonce_for_ref": self.refs.get, "on_event": self.on_ref_event}),
            ("/by-order", {"nonce_for_ref": self.refs.get, "on_event": self.on_ref_event, "ref_param": "order"}),
            ("/by-ref-boom", {"nonce_for_ref": self.ref_lookup_explodes, "on_event": self.on_ref_event}),
        ] + (
            [("/redis-down", {"nonce": NONCE, "on_event": rec.record, "seen": RedisSeenSet(url=closed_redis_url(), socket_timeout=2.0)})]
            if importlib.util.find_spec("redis")
            else []
        )


@pytest.fixture(params=["fastapi", "django"])
def served(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[httpx.Client, App]]:
    app = App()
    monkeypatch.setattr(tw, "routes", app.routes)
    serve_in_thread = tw.serve_fastapi if request.param == "fastapi" else tw.serve_django
    gen = serve_in_thread(app.rec)
    base = next(gen)
    with httpx.Client(base_url=base, timeout=30, trust_env=False) as http:
        yield http, app
    app.gate.open.set()
    gen.close()


def post(http: httpx.Client, path: str, body: Any, nonce: str | None = NONCE) -> httpx.Response:
    return tw.post(http, path, body, nonce=nonce)


# --------------------------------------------------------------------------- in one process


@pytest.mark.parametrize("path", ["/once", "/once-async", "/once-awaitable"])
def test_a_repeat_is_answered_200_without_calling_on_event(
    served: tuple[httpx.Client, App], path: str, caplog: pytest.LogCaptureFixture
) -> None:
    http, app = served
    with caplog.at_level("WARNING", logger="fxpay"):
        first = post(http, path, success())
    # A receiver without a journal has nothing to record the deal in, and nothing to log.
    assert [rec.getMessage() for rec in caplog.records if rec.name.startswith("fxpay")] == []
    assert (first.status_code, first.json()) == (200, {"ok": True})
    # The same processId again: as sent, with another dealId, as a fail event.
    for body in (success(), {**success(), "eventBody": {"processId": PID, "dealId": OTHER_DID}}, fail()):
        again = post(http, path, body)
        assert (again.status_code, again.json()) == (200, {"ok": True, "duplicate": True})
    assert [(e.process_id, e.deal_id) for e in app.rec.events] == [(PID, DID)]
    # Another processId is another event.
    assert post(http, path, success(pid=OTHER_PID), nonce="other-" + NONCE).json() == {"ok": True}
    assert [e.process_id for e in app.rec.events] == [PID, OTHER_PID]


def test_the_case_of_a_process_id_does_not_make_it_new(served: tuple[httpx.Client, App]) -> None:
    http, app = served
    assert post(http, "/fixed-once", success(pid=PID.upper())).json() == {"ok": True}
    assert post(http, "/fixed-once", success()).json() == {"ok": True, "duplicate": True}
    assert [e.process_id for e in app.rec.events] == [PID.upper()]


def test_a_delivery_that_overlaps_one_in_progress_gets_409(served: tuple[httpx.Client, App]) -> None:
    http, app = served
    answers: list[httpx.Response] = []
    first = threading.Thread(target=lambda: answers.append(post(http, "/gated", success())))
    first.start()
    assert app.gate.entered.wait(30)
    # on_event is running for PID: every other delivery of PID is refused for now.
    overlapping = all_at_once(8, lambda: post(http, "/gated", success()))
    assert [r.status_code for r in overlapping] == [409] * 8
    assert all("being handled" in r.json()["error"] for r in overlapping)
    app.gate.open.set()
    first.join(30)
    assert [(r.status_code, r.json()) for r in answers] == [(200, {"ok": True})]
    assert post(http, "/gated", success()).json() == {"ok": True, "duplicate": True}
    assert len(app.rec.events) == 1


def test_racing_deliveries_call_on_event_once(served: tuple[httpx.Client, App]) -> None:
    http, app = served
    for pid in (PID, OTHER_PID):
        nonce = NONCE if pid == PID else "other-" + NONCE
        answers = all_at_once(16, lambda pid=pid, nonce=nonce: post(http, "/once", success(pid=pid), nonce=nonce))
        handled = [r for r in answers if r.json() == {"ok": True}]
        assert len(handled) == 1, [(r.status_code, r.json()) for r in answers]
        assert all(r.status_code in (200, 409) for r in answers)
    assert sorted(e.process_id for e in app.rec.events) == sorted([PID, OTHER_PID])


def test_a_failed_on_event_leaves_the_process_id_unseen(served: tuple[httpx.Client, App]) -> None:
    http, app = served
    r = post(http, "/fail-once", success())
    assert r.status_code == 500
    assert "handler failed" in r.json()["error"]
    assert app.rec.events == []
    # The service's retry runs on_event again, and succeeds; after that it is a repeat.
    assert post(http, "/fail-once", success()).json() == {"ok": True}
    assert post(http, "/fail-once", success()).json() == {"ok": True, "duplicate": True}
    assert len(app.rec.events) == 1


def test_a_seen_set_may_be_async(served: tuple[httpx.Client, App]) -> None:
    http, app = served
    assert post(http, "/async-seen", success()).status_code == 500
    assert post(http, "/async-seen", success()).json() == {"ok": True}
    assert post(http, "/async-seen", success()).json() == {"ok": True, "duplicate": True}
    assert len(app.rec.events) == 1


def test_an_unverified_delivery_neither_marks_seen_nor_passes_as_a_repeat(served: tuple[httpx.Client, App]) -> None:
    http, app = served
    assert post(http, "/once", success(), nonce="forged").status_code == 401
    assert post(http, "/once", success()).json() == {"ok": True}
    # A forged copy of a handled event is still refused, not answered "duplicate".
    assert post(http, "/once", success(), nonce="forged").status_code == 401
    assert post(http, "/once", b"{oops").status_code == 400
    assert len(app.rec.events) == 1


def test_a_failing_seen_set(served: tuple[httpx.Client, App], caplog: pytest.LogCaptureFixture) -> None:
    http, app = served
    # The seen-set is down (Redis outage): 503 with Retry-After, so the sender backs off
    # instead of spending its retries on the outage (issue 23 item 8).
    r = post(http, "/claim-down", success())
    assert r.status_code == 503
    assert r.headers["retry-after"] == "5"
    assert "seen-set is unavailable" in r.json()["error"]
    assert app.rec.events == []
    # A real RedisSeenSet whose Redis is down answers the same.
    need("redis")
    r = post(http, "/redis-down", success())
    assert (r.status_code, r.headers["retry-after"]) == (503, "5")
    assert app.rec.events == []
    # A claim that is none of "claimed", "seen", "busy" is a bug of the seen-set: a 500.
    with caplog.at_level("ERROR", logger="fxpay.webhooks"):
        r = post(http, "/bogus-seen", success())
    assert r.status_code == 500
    assert "retry-after" not in r.headers
    assert "seen-set" in r.json()["error"]
    assert app.rec.events == []
    # ... and the bug is logged, with what the seen-set answered and for which event.
    assert [m for m in (rec.getMessage() for rec in caplog.records) if "claim returned" in m] == [
        f"the seen-set's claim returned True for DealCreated {PID}"
    ]
    # on_event ran, so the answer is 200 even though the seen-set could not record it.
    assert post(http, "/commit-down", success()).json() == {"ok": True}
    assert len(app.rec.events) == 1


def test_nonce_for_ref_looks_the_nonce_up_by_the_callback_url(served: tuple[httpx.Client, App]) -> None:
    http, app = served
    assert post(http, f"/by-ref?ref={REF}", success()).json() == {"ok": True}
    assert post(http, f"/by-ref?ref={REF}", success()).json() == {"ok": True, "duplicate": True}
    assert post(http, f"/by-order?x=1&order={REF}", success(pid=OTHER_PID)).json() == {"ok": True}
    assert app.with_ref == [(PID, REF), (OTHER_PID, REF)]
    r = post(http, "/by-ref", success())
    assert r.status_code == 401
    assert "no ref query parameter" in r.json()["error"]
    assert post(http, "/by-ref?ref=", success()).status_code == 401
    r = post(http, "/by-ref?ref=order-9", success(pid=OTHER_PID))
    assert r.status_code == 401
    assert "no callback-nonce is known" in r.json()["error"]
    assert post(http, f"/by-ref?ref={REF}", success(pid=OTHER_PID), nonce="forged").status_code == 401
    r = post(http, f"/by-ref-boom?ref={REF}", success())
    assert r.status_code == 500
    assert "lookup failed" in r.json()["error"]
    assert len(app.with_ref) == 2


def test_receiver_settings_are_checked() -> None:
    from fxpay.contrib.django import deal_created_view
    from fxpay.contrib.fastapi import deal_created_router

    for make in (deal_created_router, deal_created_view):
        with pytest.raises(fxpay.ConfigurationError, match="exactly one"):
            make(nonce=NONCE, nonce_for_ref=dict().get, on_event=print)
        with pytest.raises(fxpay.ConfigurationError, match="exactly one"):
            make(nonce_for=dict().get, nonce_for_ref=dict().get, on_event=print)
        with pytest.raises(fxpay.ConfigurationError, match="ref_param"):
            make(nonce_for_ref=dict().get, on_event=print, ref_param="")
        with pytest.raises(TypeError, match="seen must be a SeenSet"):
            make(nonce=NONCE, on_event=print, seen=set())  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="on_event must be callable"):
            make(nonce=NONCE, on_event=None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="nonce_for_ref must be callable"):
            make(nonce_for_ref="nope", on_event=print)  # type: ignore[arg-type]
        with pytest.raises(fxpay.ConfigurationError, match="nonce= must not be empty"):
            make(nonce="", on_event=print)
        with pytest.raises(TypeError, match="ref_param must be str"):
            make(nonce_for_ref=dict().get, on_event=print, ref_param=b"order")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the seen-sets


def test_memory_seen_set_claim_commit_release() -> None:
    s = MemorySeenSet()
    assert isinstance(s, SeenSet)
    assert s.claim("a") == "claimed"
    assert s.claim("a") == "busy"
    s.release("a")
    assert s.claim("a") == "claimed"
    s.commit("a")
    assert s.claim("a") == "seen"
    s.release("a")  # releasing a committed key changes nothing
    assert s.claim("a") == "seen"
    assert s.claim("b") == "claimed"
    assert len(s) == 2
    assert repr(s) == "MemorySeenSet(ttl=604800, lease=300)"


def test_memory_seen_set_gives_one_claim_to_two_threads_claiming_one_id() -> None:
    # Two deliveries of one processId on two threads: exactly one may run on_event. The first
    # claim is held at the point where it has looked the id up and is about to record its
    # claim (the second hash of its key), while a second thread claims the same id. The set's
    # lock keeps the second claim out until the first is recorded ("busy"); without the lock
    # the second claim finds the id free too and both run on_event.
    seen = MemorySeenSet()
    first = threading.get_ident()
    hashes = 0
    second_done = threading.Event()
    results: dict[str, str] = {}

    def second() -> None:
        results["second"] = seen.claim(PID)
        second_done.set()

    helper = threading.Thread(target=second, daemon=True)

    class HeldKey(str):
        __slots__ = ()

        def __hash__(self) -> int:
            nonlocal hashes
            if threading.get_ident() == first:
                hashes += 1
                if hashes == 2:
                    helper.start()
                    # With the lock, the second claim cannot end before this one: the wait
                    # runs out (and only costs time). Without it, it ends at once.
                    second_done.wait(2.0)
            return str.__hash__(self)

    results["first"] = seen.claim(HeldKey(PID))
    assert hashes >= 2, "claim no longer hashes its key twice: the test holds it nowhere"
    helper.join(30)
    assert not helper.is_alive()
    assert results == {"first": "claimed", "second": "busy"}


def test_memory_seen_set_forgets_after_ttl_and_lease() -> None:
    s = MemorySeenSet(ttl=0.05, lease=0.05)
    assert s.claim("seen") == "claimed"
    s.commit("seen")
    assert s.claim("crashed") == "claimed"  # never committed nor released
    wait_for(lambda: s.claim("seen") == "claimed", what="the ttl to pass")
    wait_for(lambda: s.claim("crashed") == "claimed", what="the lease to lapse")


def test_memory_seen_set_prunes_the_lapsed_claims_around_a_seen_id() -> None:
    s = MemorySeenSet(ttl=3600, lease=0.05)
    assert s.claim("crashed-before") == "claimed"
    assert s.claim("done") == "claimed"
    assert s.claim("crashed-after") == "claimed"
    s.commit("done")
    # Both lapsed claims go, whichever side of the seen id they were claimed on; the seen id stays.
    wait_for(lambda: len(s) == 1, what="the lapsed claims to be pruned")
    assert s.claim("done") == "seen"


def lapse(s: MemorySeenSet, claimed_before: float) -> None:
    """Waits on the monotonic clock until a claim made before ``claimed_before`` has lapsed."""
    wait_for(lambda: time.monotonic() > claimed_before + s._lease, what="the lease to lapse")


def test_memory_seen_set_claim_alone_drops_lapsed_claims() -> None:
    # A receiver only claims, commits and releases: claim must bound the memory, not len().
    s = MemorySeenSet(lease=0.05)
    assert s.claim("crashed") == "claimed"
    lapse(s, time.monotonic())
    assert s.claim("next") == "claimed"
    assert list(s._entries) == ["next"]


def test_memory_seen_set_keeps_entries_in_the_order_they_were_last_set() -> None:
    # Pruning walks from the oldest entry, so a claim taken anew moves to the end.
    s = MemorySeenSet(ttl=3600, lease=0.05)
    assert s.claim("done") == "claimed"
    s.commit("done")
    assert s.claim("crashed") == "claimed"
    assert s.claim("other") == "claimed"
    lapse(s, time.monotonic())
    assert s.claim("crashed") == "claimed"
    assert list(s._entries) == ["done", "other", "crashed"]


def test_memory_seen_set_settings_are_checked() -> None:
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(fxpay.ConfigurationError, match="ttl"):
            MemorySeenSet(ttl=bad)
        with pytest.raises(fxpay.ConfigurationError, match="lease"):
            RedisSeenSet(url="redis://127.0.0.1:1/0", lease=bad)
    with pytest.raises(TypeError, match="ttl must be a number"):
        MemorySeenSet(ttl="7d")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="lease must be a number"):
        MemorySeenSet(lease=True)
    with pytest.raises(fxpay.ConfigurationError, match="client or a url"):
        RedisSeenSet()
    with pytest.raises(TypeError, match="prefix must be str"):
        RedisSeenSet(url="redis://127.0.0.1:1/0", prefix=b"fxpay:seen:")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.mark.parametrize("decode", [False, True])
def test_redis_seen_set(redis_url: str, decode: bool) -> None:
    import redis

    r = redis.Redis.from_url(redis_url, decode_responses=decode)
    prefix = new_prefix()
    a, b = RedisSeenSet(r, prefix=prefix), RedisSeenSet(url=redis_url, prefix=prefix)
    assert isinstance(a, SeenSet)
    assert a.claim(PID) == "claimed"
    assert b.claim(PID) == "busy"
    b.release(PID)  # b holds no claim on PID: nothing happens
    assert a.claim(PID) == "busy"
    assert 0 < r.pttl(prefix + PID) <= 300_000
    a.release(PID)
    assert b.claim(PID) == "claimed"
    b.commit(PID)
    assert a.claim(PID) == "seen"
    assert b.claim(PID) == "seen"
    assert DEFAULT_TTL - 60 < r.ttl(prefix + PID) <= DEFAULT_TTL == 7 * 24 * 3600
    # A lapsed claim (its holder died) can be taken again.
    short = RedisSeenSet(r, prefix=prefix, lease=0.05)
    assert short.claim(OTHER_PID) == "claimed"
    wait_for(lambda: a.claim(OTHER_PID) == "claimed", what="the lease to lapse")
    # The late holder's release does not drop the new claim.
    short.release(OTHER_PID)
    assert b.claim(OTHER_PID) == "busy"
    assert repr(a) == f"RedisSeenSet(prefix={prefix!r}, ttl=604800, lease=300)"


def test_redis_seen_set_forgets_a_claims_token_once_it_is_settled(redis_url: str) -> None:
    # The tokens are this object's memory of its own claims: a long-running receiver must not
    # keep one per event it handled.
    s = RedisSeenSet(url=redis_url, prefix=new_prefix())
    assert s.claim(PID) == "claimed"
    assert s.claim(OTHER_PID) == "claimed"
    assert set(s._tokens) == {PID, OTHER_PID}
    s.commit(PID)
    s.release(OTHER_PID)
    assert s._tokens == {}
    assert s.claim(PID) == "seen"
    assert s.claim(OTHER_PID) == "claimed"


def test_racing_claims_in_redis_let_one_through(redis_url: str) -> None:
    prefix = new_prefix()
    sets = [RedisSeenSet(url=redis_url, prefix=prefix) for _ in range(12)]
    it = iter(sets)
    lock = threading.Lock()

    def claim() -> str:
        with lock:
            s = next(it)
        return s.claim(PID)

    assert sorted(all_at_once(12, claim)) == ["busy"] * 11 + ["claimed"]


# --------------------------------------------------------------------------- two processes


@pytest.fixture(scope="module")
def two_receivers(redis_url: str) -> Iterator[tuple[str, str, str]]:
    """Two uvicorn processes serving the FastAPI receivers with one RedisSeenSet."""
    prefix = new_prefix()
    with serve("uvicorn", redis_url, prefix) as a, serve("uvicorn", redis_url, prefix) as b:
        yield a, b, prefix


def handled(r: Any, prefix: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange(prefix + "handled", 0, -1)]


def test_two_processes_handle_each_process_id_once(redis_url: str, two_receivers: tuple[str, str, str]) -> None:
    import redis

    a, b, prefix = two_receivers
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    pids = [f"{i:08x}-1f2d-4c39-9d55-8a5f8d1e7a10" for i in range(40)]
    for pid in pids:
        r.set(prefix + "nonce:" + pid, NONCE + pid[:8])
    start = r.llen(prefix + "handled")

    def deliver(pid: str, base: str) -> httpx.Response:
        return httpx.post(f"{base}/by-id", content=dumps(success(pid=pid)), headers={"callback-nonce": NONCE + pid[:8]}, timeout=30)

    # One after the other, alternating which process gets the first delivery.
    for i, pid in enumerate(pids[:10]):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        assert deliver(pid, first).json() == {"ok": True}
        assert deliver(pid, second).json() == {"ok": True, "duplicate": True}
    # The same delivery reaches both processes at once.
    for pid in pids[10:]:
        barrier = threading.Barrier(2)
        out: dict[str, httpx.Response] = {}

        def go(base: str, pid: str, barrier: threading.Barrier, out: dict[str, httpx.Response]) -> None:
            barrier.wait()
            out[base] = deliver(pid, base)

        threads = [threading.Thread(target=go, args=(base, pid, barrier, out)) for base in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        answers = [x.json() for x in out.values()]
        assert answers.count({"ok": True}) == 1, answers
        assert all(x.status_code in (200, 409) for x in out.values())
        # Whatever the other one answered, a later delivery to it is a repeat.
        assert deliver(pid, a).json() == deliver(pid, b).json() == {"ok": True, "duplicate": True}
    got = handled(r, prefix)[start:]
    assert sorted(h["processId"] for h in got) == sorted(pids)
    assert len({h["worker"] for h in got[:10]}) == 2


def test_two_processes_overlap_and_failure(redis_url: str, two_receivers: tuple[str, str, str]) -> None:
    import redis

    a, b, prefix = two_receivers
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    headers = {"callback-nonce": NONCE}
    r.set(prefix + "nonce:" + PID, NONCE)
    r.set(prefix + "nonce:" + OTHER_PID, NONCE)
    start = r.llen(prefix + "handled")

    # Process A is inside on_event for PID: B refuses the same delivery for now.
    r.set(prefix + "hold:" + PID, 1)
    out: list[httpx.Response] = []
    first = threading.Thread(target=lambda: out.append(httpx.post(f"{a}/by-id", content=dumps(success()), headers=headers, timeout=60)))
    first.start()
    wait_for(lambda: bool(r.exists(prefix + "started:" + PID)), what="on_event to start in A")
    assert httpx.post(f"{b}/by-id", content=dumps(success()), headers=headers).status_code == 409
    r.rpush(prefix + "go:" + PID, 1)
    first.join(60)
    assert [x.json() for x in out] == [{"ok": True}]
    assert httpx.post(f"{b}/by-id", content=dumps(success()), headers=headers).json() == {"ok": True, "duplicate": True}

    # on_event raises in A: the claim is released, and B handles the retry.
    r.set(prefix + "fail:" + OTHER_PID, 1)
    body = dumps(success(pid=OTHER_PID))
    assert httpx.post(f"{a}/by-id", content=body, headers=headers).status_code == 500
    assert httpx.post(f"{b}/by-id", content=body, headers=headers).json() == {"ok": True}
    assert httpx.post(f"{a}/by-id", content=body, headers=headers).json() == {"ok": True, "duplicate": True}
    assert [h["processId"] for h in handled(r, prefix)[start:]] == [PID, OTHER_PID]
