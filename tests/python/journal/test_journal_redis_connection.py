"""A RedisJournal made from a URL keeps its storage in fxpay's Rust core (fxpay-core
``journal/redis/``): its one connection per process, closed by Redis under a live process
(``CLIENT KILL``, a restart, its ``timeout``), is made anew before a claim goes out, and a
claim is sent again only if none of it was written (docs/idempotency.md)."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import need
from journal_support import QUOTES, RedisServer, pending_entry, quote, requests_to


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _kill_clients(url: str) -> None:
    """Redis closes every normal connection but the one asking."""
    redis = need("redis")
    admin = redis.Redis.from_url(url)
    try:
        assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
    finally:
        admin.close()


def test_a_connection_closed_by_redis_is_made_anew_and_the_call_goes_through(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """On a Unix socket, a write to a connection Redis closed fails before any of it is
    written (EPIPE): the claim is sent again on a new connection, checked first. Every
    keyed call goes through once, none twice."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        journal = fxpay.RedisJournal(server.url, prefix="stale:")
        journal.create()
        with fxpay_sandbox.client(journal=journal) as c:
            ids = [quote(c, "k0")]
            for i in range(1, 6):
                journal.close()  # its result written: the claim below is the first write after the kill
                _kill_clients(server.url)
                ids.append(quote(c, f"k{i}"))
            assert [quote(c, f"k{i}") for i in range(6)] == ids  # replays: nothing sent
        assert requests_to(fxpay_sandbox, QUOTES) == 6
        assert [journal.get(f"k{i}").state for i in range(6)] == ["done"] * 6  # type: ignore[union-attr]
    finally:
        server.stop()


def test_an_idle_connection_is_checked_before_a_claim_goes_out_on_it(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """Over TCP a write to a connection Redis closed is accepted by the kernel and the loss
    shows only on the read: the claim may have landed, so it is never sent again. What
    keeps such a claim from going out is the check first: a connection idle for a second is
    asked a PING, and made anew when Redis closed it."""
    port = _free_port()
    server = RedisServer(tmp_path, extra=("--port", str(port)))
    server.start()
    url = f"redis://127.0.0.1:{port}/0"
    try:
        journal = fxpay.RedisJournal(url, prefix="idle:")
        journal.create()
        with fxpay_sandbox.client(journal=journal) as c:
            quote(c, "k0")
            for i in range(1, 3):
                journal.close()  # its result written: the claim below is the first write after the kill
                _kill_clients(url)
                time.sleep(1.5)  # idle past the check's second
                quote(c, f"k{i}")
        assert requests_to(fxpay_sandbox, QUOTES) == 3
        assert [journal.get(f"k{i}").state for i in range(3)] == ["done"] * 3  # type: ignore[union-attr]
    finally:
        server.stop()


def test_a_redis_restarted_with_its_data_is_used_again(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """Stopped and started again on the same AOF: the journal's identity is there, the next
    connection is checked and used, and the keys booked before replay without sending."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        journal = fxpay.RedisJournal(server.url, prefix="restart:")
        journal.create()
        with fxpay_sandbox.client(journal=journal) as c:
            first = quote(c, "k0")
            journal.close()  # its result written before the stop
            server.stop()
            with pytest.raises(fxpay.JournalError, match="the journal's Redis at"):
                quote(c, "k1")
            server.start()
            assert quote(c, "k0") == first
            quote(c, "k1")  # its claim above failed closed and was undone: sent now, once
        assert requests_to(fxpay_sandbox, QUOTES) == 2
    finally:
        server.stop()


def test_the_scripts_are_loaded_again_after_script_flush(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """``SCRIPT FLUSH`` under a live connection: a claim answered NOSCRIPT never ran, and is
    sent again once the scripts are loaded."""
    redis = need("redis")
    server = RedisServer(tmp_path)
    server.start()
    try:
        journal = fxpay.RedisJournal(server.url, prefix="noscript:")
        journal.create()
        with fxpay_sandbox.client(journal=journal) as c:
            quote(c, "k0")
            admin = redis.Redis.from_url(server.url)
            admin.script_flush()
            admin.close()
            quote(c, "k1")
        assert requests_to(fxpay_sandbox, QUOTES) == 2
    finally:
        server.stop()


def test_a_redis_that_stops_answering_fails_a_claim_closed_within_the_timeout(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """Redis stopped (SIGSTOP): the kernel still takes the claim's bytes, and nothing
    answers. The call fails closed after ``socket_timeout``, nothing sent, not never; once
    Redis runs again, the next call goes through on a new connection."""
    import os
    import signal

    server = RedisServer(tmp_path)
    server.start()
    assert server.proc is not None
    try:
        journal = fxpay.RedisJournal(server.url, prefix="stopped:", socket_timeout=1.0)
        journal.create()
        with fxpay_sandbox.client(journal=journal) as c:
            quote(c, "warm")
            sent = requests_to(fxpay_sandbox, QUOTES)
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(fxpay.JournalError):
                    quote(c, "stalled")
                took = time.monotonic() - started
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            assert 0.9 <= took < 10, took
            assert requests_to(fxpay_sandbox, QUOTES) == sent  # nothing sent
            qid = quote(c, "after")
            assert journal.get("after").result == qid  # type: ignore[union-attr]
    finally:
        server.stop()


def test_a_signal_to_the_calling_thread_mid_command_does_not_fail_the_write(tmp_path: Path) -> None:
    """A signal with a Python handler (installed without ``SA_RESTART``: a server's SIGTERM,
    gunicorn's or tornado's SIGCHLD, pytest-timeout's SIGALRM) delivered to the thread that
    waits for Redis's answer to a claim interrupts the read (``EINTR``: found by CI as
    ``RedisJournal.swap() failed: ConnectionError: Interrupted system call``). The write
    was sent: it cannot be sent again, and failing it leaves a key claimed for nothing. The
    core holds such signals off that thread while it talks to Redis; the handler runs once
    the claim has its answer."""
    import signal
    import threading

    redis = need("redis")
    server = RedisServer(tmp_path)
    server.start()
    caught: list[float] = []
    before = signal.signal(signal.SIGUSR1, lambda *_: caught.append(time.monotonic()))
    try:
        journal = fxpay.RedisJournal(server.url, prefix="signalled:", socket_timeout=10.0)
        journal.create()
        assert journal.claim(pending_entry("warm")) is None  # the connection made and checked
        admin = redis.Redis.from_url(server.url)
        main = threading.main_thread().ident
        assert main is not None
        assert threading.get_ident() == main  # pytest runs tests on the main thread
        done = threading.Event()

        def interrupt() -> None:
            time.sleep(0.2)  # the claim waits for its answer (Redis paused)
            while not done.is_set():
                signal.pthread_kill(main, signal.SIGUSR1)
                time.sleep(0.05)

        try:
            admin.client_pause(1000, all=True)
            sender = threading.Thread(target=interrupt)
            sender.start()
            try:
                started = time.monotonic()
                assert journal.claim(pending_entry("signalled")) is None
                answered = time.monotonic()
            finally:
                done.set()
                sender.join(10)
        finally:
            admin.close()
        assert answered - started >= 0.5, "the claim was answered before Redis was paused"
        assert caught, "the handler never ran"
        assert journal.get("signalled").state == "pending"  # type: ignore[union-attr]
    finally:
        signal.signal(signal.SIGUSR1, before)
        server.stop()
