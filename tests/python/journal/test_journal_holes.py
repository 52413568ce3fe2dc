"""The holes under the journal, each reproduced against real parts (SQLite files, a real
redis-server, the sandbox over loopback): an emptied or replaced journal file, a fork while
other threads write, a Redis that forgets, a claim that lands after its call gave up, and a
callback nonce in a pickled error."""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import fork_quietly, need, need_program, wait_child
from journal_support import RedisServer, deal_args, redis_server, requests_to

__all__ = ["redis_server"]

QUOTES = "POST /v1/payments/quotes"
DEALS = "POST /v1/payments/deals"
SPOT = "POST /v1/payments/deals/spot"


def quote(c: fxpay.Client, key: str, amount: str = "100") -> str:
    return c.create_quote(buy_currency="USD", buy_amount=Decimal(amount), sell_currency="AUD", idempotency_key=key)


# -- a journal knows its own file -------------------------------------------------------------


def test_an_emptied_journal_file_is_refused_not_taken_for_a_new_journal(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """A journal truncated to 0 bytes (a restore gone wrong) made a re-run send every key
    again; it is now a JournalError, and the file is left as it was."""
    path = tmp_path / "payouts.journal"
    with fxpay_sandbox.client(journal=fxpay.SqliteJournal(path)) as c:
        ids = [quote(c, f"q{i}") for i in range(3)]
    assert requests_to(fxpay_sandbox, QUOTES) == 3
    for side in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if side.exists():
            side.unlink() if side != path else os.truncate(path, 0)
    assert path.stat().st_size == 0
    with pytest.raises(fxpay.JournalError, match=r"empty \(0 bytes\).*not an fxpay journal") as e:
        fxpay.SqliteJournal(path)
    assert "restore it from a backup" in str(e.value)
    assert path.stat().st_size == 0, "the emptied file was made into a journal"
    # The re-run cannot start, so it books nothing twice.
    with pytest.raises(fxpay.JournalError), fxpay_sandbox.client(journal=fxpay.SqliteJournal(path)) as c:
        [quote(c, f"q{i}") for i in range(3)]
    assert requests_to(fxpay_sandbox, QUOTES) == 3
    assert len(set(ids)) == 3


def test_a_journal_file_emptied_under_a_live_journal_refuses_its_next_claim(fxpay_sandbox: Any, tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = fxpay.SqliteJournal(path)
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "a")
        os.truncate(path, 0)
        with pytest.raises(fxpay.JournalError, match="emptied"):
            quote(c, "b")
    assert requests_to(fxpay_sandbox, QUOTES) == 1


@pytest.mark.parametrize(
    ("content", "found"),
    [
        (b"not a database at all\n" * 10, "not an SQLite database"),
        (b"SQLite format 3\x00", "not an SQLite database"),  # a header cut short
    ],
)
def test_a_file_that_is_not_a_journal_is_refused_and_left_as_it_was(tmp_path: Path, content: bytes, found: str) -> None:
    path = tmp_path / "other.db"
    path.write_bytes(content)
    with pytest.raises(fxpay.JournalError, match=found):
        fxpay.SqliteJournal(path)
    assert path.read_bytes() == content


@pytest.mark.parametrize("make", [os.mkdir, os.mkfifo], ids=["a folder", "a fifo"])
def test_what_is_not_a_regular_file_is_refused_and_left_as_it_was(tmp_path: Path, make: Any) -> None:
    """A folder or a named pipe at the journal's path is not a journal: refused by its kind
    (SQLite is never asked to open it), its mode untouched."""
    path = tmp_path / "other.db"
    make(path)
    os.chmod(path, 0o755)
    with pytest.raises(fxpay.JournalError, match="is not a regular file, so not a journal"):
        fxpay.SqliteJournal(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o755


def test_another_programs_sqlite_database_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    with pytest.raises(fxpay.JournalError, match="without an fxpay journal table"):
        fxpay.SqliteJournal(path)
    conn = sqlite3.connect(path)
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
    conn.close()
    assert names == ["users"]
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE fxpay_journal (key TEXT PRIMARY KEY, state TEXT NOT NULL, result TEXT, data TEXT NOT NULL)")
    conn.commit()
    conn.close()
    with pytest.raises(fxpay.JournalError, match="another program's SQLite database"):
        fxpay.SqliteJournal(path)


def test_a_journal_of_an_older_fxpay_is_still_opened(tmp_path: Path) -> None:
    """A journal made before the application id was set: the table is there, id 0."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE fxpay_journal (key TEXT PRIMARY KEY, state TEXT NOT NULL, result TEXT, data TEXT NOT NULL)")
    conn.commit()
    conn.close()
    j = fxpay.SqliteJournal(path)
    assert j.get("nothing") is None
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == 0x6678704A
    conn.close()


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_journal_file_removed_or_replaced_under_a_live_journal_refuses_its_next_claim(
    fxpay_sandbox: Any, tmp_path: Path, how: str
) -> None:
    """The live process kept the old file and a new process made another at the path: the
    journal split in two. The live journal now sees it and sends nothing."""
    path = tmp_path / "j.db"
    journal = fxpay.SqliteJournal(path)
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "a")
        for side in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            side.unlink(missing_ok=True)
        if how == "replaced":
            fxpay.SqliteJournal(path)  # a new process makes a new, empty journal there
        with pytest.raises(fxpay.JournalError, match=how) as e:
            quote(c, "b")
        assert "nothing was sent" in str(e.value)
        # The key that was done is not sent again either.
        with pytest.raises(fxpay.JournalError):
            quote(c, "a")
    assert requests_to(fxpay_sandbox, QUOTES) == 1


def test_two_processes_creating_one_journal_never_see_it_half_made(tmp_path: Path) -> None:
    """A new journal is made complete under a temporary name and linked into place: 6
    processes that open the same new path at once all open it (none finds it empty)."""
    path = tmp_path / "new.db"
    code = "import sys, time, fxpay\ntime.sleep(max(0.0, float(sys.argv[2]) - time.time()))\nfxpay.SqliteJournal(sys.argv[1]).get('k')\n"
    start = str(time.time() + 1.5)
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), start], stderr=subprocess.PIPE, text=True) for _ in range(6)]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".fxpay-journal-")] == []


def test_a_new_journal_leaves_no_descriptor_of_its_temporary_file_or_folder_open(tmp_path: Path) -> None:
    """The temporary file a new journal is made in is linked into place and removed, and the
    descriptors of it and of its folder (each synced) closed: none of this process's open
    files is either."""
    fxpay.SqliteJournal(tmp_path / "new.db").close()
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("no /proc/self/fd here")
    opened = []
    for fd in fds.iterdir():
        try:
            opened.append(os.readlink(fd))
        except OSError:  # the listing's own descriptor, closed since
            continue
    folder = os.path.realpath(tmp_path)
    assert [target for target in opened if ".fxpay-journal-" in target or target == folder] == []


def test_opening_an_existing_journal_makes_and_removes_nothing_in_its_folder(tmp_path: Path) -> None:
    """A journal is made only where no file is: opening one that exists (here in a process
    that has it open already, so SQLite makes no file either) neither makes nor removes a
    file in its folder, not even a temporary one (the folder's modification time stays)."""
    first = fxpay.SqliteJournal(tmp_path / "j.db")
    assert first.get("k") is None  # its connection open: -wal and -shm are there
    before = (sorted(os.listdir(tmp_path)), os.stat(tmp_path).st_mtime_ns)
    time.sleep(0.05)  # past a tick of the file system's clock
    again = fxpay.SqliteJournal(tmp_path / "j.db")
    assert again.get("k") is None
    assert (sorted(os.listdir(tmp_path)), os.stat(tmp_path).st_mtime_ns) == before
    first.close()


def test_an_existing_journal_is_made_private_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    j = fxpay.SqliteJournal(path)
    j.get("x")  # its open connection keeps -wal and -shm there (no second SQLite in this process)
    sides = [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]
    assert len(sides) == 3
    for p in sides:
        os.chmod(p, 0o644)
    fxpay.SqliteJournal(path).get("x")
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in sides} == {p.name: 0o600 for p in sides}
    j.close()


def test_a_journal_this_user_does_not_own_is_used_with_one_warning_naming_its_file() -> None:
    """A journal file made by another account cannot be made private by this one: it is used
    as it is, with one warning naming the journal's file (not one per file: its -wal and -shm,
    which cannot be made private either, are not named); its modes stay."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to be another user in a forked child")
    folder = Path(tempfile.mkdtemp())  # not under pytest's 0700 folders: the other user reaches it
    try:
        os.chmod(folder, 0o777)
        path = folder / "j.db"
        owner = fxpay.SqliteJournal(path)
        assert owner.get("k") is None  # its connection open: -wal and -shm are there
        sides = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
        for p in sides:
            os.chmod(p, 0o666)
        records: list[logging.LogRecord] = []
        handler = logging.Handler(logging.DEBUG)
        handler.emit = records.append  # type: ignore[method-assign]
        logging.getLogger("fxpay.journal").addHandler(handler)
        try:
            pid = fork_quietly()
            if pid == 0:
                code = 1
                try:
                    os.setgid(65534)
                    os.setuid(65534)  # nobody: not the journal's owner
                    journal = fxpay.SqliteJournal(path)
                    said = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
                    code = 0 if said == [f"SqliteJournal cannot make {str(path)!r} private (mode 0600): not its owner"] else 2
                    code = code or (0 if journal.get("k") is None else 3)
                finally:
                    os._exit(code)
            child = wait_child(pid, 30)
        finally:
            logging.getLogger("fxpay.journal").removeHandler(handler)
        assert child != 2, "not one warning naming the journal's file"
        assert child == 0, f"the child ended with {child}"
        assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in sides} == {p.name: 0o666 for p in sides}
        owner.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: fxpay.SqliteJournal(p, timeout=10**400), "timeout must be more than 0"),
        (lambda p: fxpay.SqliteJournal(p, timeout=float("nan")), "timeout must be more than 0"),
        (lambda p: fxpay.SqliteJournal(p, timeout=0), "timeout must be more than 0"),
        (lambda p: fxpay.SqliteJournal(p, timeout=10**400), "seconds, got a number that large$"),
        (lambda p: fxpay.SqliteJournal(p, timeout=-2), "seconds, got -2$"),
        (lambda p: fxpay.SqliteJournal(p, timeout=-0.1234567891), r"seconds, got -0\.123457$"),
        (lambda p: fxpay.RedisJournal("redis://127.0.0.1:1/0", socket_timeout=-1), "socket_timeout must be more than 0"),
        (lambda p: fxpay.RedisJournal("redis://127.0.0.1:1/0", socket_timeout=float("inf")), "socket_timeout must be"),
        (lambda p: fxpay.RedisJournal("redis://127.0.0.1:1/0", socket_timeout=10**400), "seconds, got a number that large$"),
        (lambda p: fxpay.RedisJournal("redis://127.0.0.1:1/0", socket_timeout=-2), "seconds, got -2$"),
    ],
)
def test_a_wrong_timeout_is_a_configuration_error(tmp_path: Path, make: Any, match: str) -> None:
    need("redis")
    with pytest.raises(fxpay.ConfigurationError, match=match):
        make(tmp_path / "j.db")


def test_wrong_types_of_the_new_settings_are_type_errors(tmp_path: Path) -> None:
    need("redis")
    with pytest.raises(TypeError, match="require_persistence"):
        fxpay.RedisJournal("redis://127.0.0.1:1/0", require_persistence="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="socket_timeout"):
        fxpay.RedisJournal("redis://127.0.0.1:1/0", socket_timeout="5")  # type: ignore[arg-type]


def test_a_swap_given_what_is_not_an_entry_is_a_type_error_naming_it() -> None:
    """A wrong type is a TypeError naming the parameter (old, new), not an AttributeError
    from inside the journal; nothing is stored."""
    j = fxpay.MemoryJournal()
    entry = fxpay.JournalEntry.from_json(
        '{"key":"k","operation":"create_quote","fingerprint":"f","state":"pending","result":null,'
        '"deal_id":null,"holder":"h/1/t","lease_until":1,"created_at":1,"updated_at":1,"error":null,'
        '"response":null,"nonce":null}'
    )
    with pytest.raises(TypeError, match=r"old must be a fxpay\.JournalEntry, not str"):
        j.swap("k", entry)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"new must be a fxpay\.JournalEntry, not dict"):
        j.swap(entry, {"key": "k"})  # type: ignore[arg-type]
    assert j.get("k") is None


def test_a_full_disk_names_the_disk_not_the_rollback(tmp_path: Path) -> None:
    """SQLite rolls a transaction back itself when the disk is full; the ROLLBACK that
    followed failed with "cannot rollback" and hid why."""
    j = fxpay.SqliteJournal(tmp_path / "j.db")
    pages = int(j._store.diagnostic("page_count"))
    j._store.diagnostic("max_page_count", pages)  # a disk with no room left
    big = "x" * 100000
    entry = fxpay.JournalEntry.from_json(
        '{"key":"k","operation":"create_quote","fingerprint":"f","state":"pending","result":null,'
        '"deal_id":null,"holder":"h/1/t","lease_until":1,"created_at":1,"updated_at":1,"error":"' + big + '",'
        '"response":null,"nonce":null}'
    )
    with pytest.raises(fxpay.JournalError, match="full") as e:
        j.claim(entry)
    assert "rollback" not in str(e.value)


# -- fork safety ---------------------------------------------------------------------------


def _fork_while_writing(journal: fxpay.Journal, sandbox: Any, *, forks: int = 8, threads: int = 8) -> list[int]:
    """`threads` threads make keyed quotes while this thread forks `forks` children, each of
    which makes one keyed quote of its own; the exit codes (-1: hung, killed after 30 s)."""
    c = sandbox.client(journal=journal)
    stop = threading.Event()
    made = [0] * threads

    def work(t: int) -> None:
        n = 0
        while not stop.is_set():
            quote(c, f"w{t}-{n}")
            n += 1
            made[t] = n

    workers = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(threads)]
    for w in workers:
        w.start()
    codes = []
    try:
        while sum(made) < threads:  # every thread is writing
            time.sleep(0.01)
        for i in range(forks):
            time.sleep(0.05 + 0.013 * i)
            pid = fork_quietly()
            if pid == 0:  # the child: one keyed call with the parent's client and journal
                code = 1
                try:
                    quote(c, f"child-{i}")
                    journal.close()  # its result waits for a commit: os._exit skips exit's
                    code = 0
                finally:
                    os._exit(code)
            deadline = time.monotonic() + 30
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    codes.append(os.waitstatus_to_exitcode(status))
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    codes.append(-1)
                    break
                time.sleep(0.01)
    finally:
        stop.set()
        for w in workers:
            w.join(30)
        c.close()
    return codes


def test_a_child_forked_while_8_threads_write_the_sqlite_journal_does_not_hang(fxpay_sandbox: Any, tmp_path: Path) -> None:
    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    codes = _fork_while_writing(journal, fxpay_sandbox)
    print("exit codes of the children:", codes)
    assert codes == [0] * 8, f"{codes.count(-1)} of 8 children hung"
    for i in range(8):
        entry = journal.get(f"child-{i}")
        assert entry is not None
        assert entry.state == "done"


FREED_AT_FORK = """
import gc, os, sys
# Registered before fxpay is imported: run after a fork in the parent before fxpay's own hook,
# between fxpay's before and its after.
os.register_at_fork(after_in_parent=gc.collect)
import fxpay

gc.disable()  # the dead journal below stays until the hook collects it
live = fxpay.SqliteJournal(sys.argv[1])
dead = fxpay.SqliteJournal(sys.argv[2])
dead.cycle = dead  # freed only by the garbage collector
del dead
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print(live.get("after-the-fork"), flush=True)  # a SQLite call of the parent
"""


def test_a_journal_freed_during_a_fork_leaves_the_parents_sqlite_calls_free(tmp_path: Path) -> None:
    """A journal the garbage collector frees between the fork's before and after hooks: its
    before ran (SQLite's fork gate counted it), so its after must run too, or the gate stays
    held and the parent's next SQLite call waits for ever."""
    script = tmp_path / "freed.py"
    script.write_text(FREED_AT_FORK)
    p = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "live.db"), str(tmp_path / "dead.db")], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "None"


def test_a_child_forked_while_8_threads_write_the_redis_journal_does_not_hang(fxpay_sandbox: Any, redis_server: RedisServer) -> None:
    journal = fxpay.RedisJournal(redis_server.url, prefix=f"fork{time.monotonic_ns()}:")
    journal.create()
    codes = _fork_while_writing(journal, fxpay_sandbox)
    print("exit codes of the children:", codes)
    assert codes == [0] * 8, f"{codes.count(-1)} of 8 children hung"


def test_a_child_forked_while_a_thread_holds_the_redis_pool_lock_does_not_hang(fxpay_sandbox: Any, redis_server: RedisServer) -> None:
    """The cause of a rare hang above: redis-py's pool, made anew in a child on first use,
    first takes the inherited pool's lock; here a parent thread holds it across the fork. (A
    journal over a client given runs on redis-py; one made from a URL, in Rust, has no pool.)"""
    import redis

    journal = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=f"forklock{time.monotonic_ns()}:")
    journal.create()
    c = fxpay_sandbox.client(journal=journal)
    quote(c, "parent")
    pool = journal._r.connection_pool  # redis-py's own lock, held to make the fork land in it
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool._lock:
            held.set()
            release.wait(60)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    held.wait(10)
    pid = fork_quietly()
    if pid == 0:
        code = 1
        try:
            quote(c, "child")
            journal.close()  # its result waits for a commit: os._exit skips exit's
            code = 0
        finally:
            os._exit(code)
    try:
        deadline = time.monotonic() + 20
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the child hung on the parent's redis pool lock")
            time.sleep(0.02)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        release.set()
        t.join(10)
        c.close()
    entry = journal.get("child")
    assert entry is not None
    assert entry.state == "done"


# -- a Redis that would forget -------------------------------------------------------------


def test_a_redis_without_aof_is_refused_and_nothing_is_sent(fxpay_sandbox: Any, tmp_path: Path) -> None:
    server = RedisServer(tmp_path, aof=False)
    server.start()
    try:
        journal = fxpay.RedisJournal(server.url, prefix="noaof:")
        with pytest.raises(fxpay.JournalError, match="appendonly setting is 'no'"):
            journal.create()  # refused as the journal is made, as when it is used
        with fxpay_sandbox.client(journal=journal) as c:
            with pytest.raises(fxpay.JournalError, match="appendonly setting is 'no'") as e:
                quote(c, "k")
            assert "Nothing was sent" in str(e.value)
            assert requests_to(fxpay_sandbox, QUOTES) == 0
            # For tests: the check skipped on request.
            loose = fxpay.RedisJournal(server.url, prefix="noaof:", require_persistence=False)
            loose.create()
        with fxpay_sandbox.client(journal=loose) as c:
            qid = quote(c, "k")
            assert quote(c, "k") == qid
        assert requests_to(fxpay_sandbox, QUOTES) == 1
    finally:
        server.stop()


def test_a_redis_that_forgets_on_restart_no_longer_books_twice(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """The review's run: keys claimed, Redis killed and restarted without AOF, the same run
    again. It booked every row twice; now the first run already refuses to start."""
    server = RedisServer(tmp_path, aof=False)
    server.start()
    try:
        with fxpay_sandbox.client(journal=fxpay.RedisJournal(server.url)) as c:
            for i in range(3):
                with pytest.raises(fxpay.JournalError):
                    quote(c, f"k{i}")
        server.stop()
        server.start()
        with fxpay_sandbox.client(journal=fxpay.RedisJournal(server.url)) as c:
            for i in range(3):
                with pytest.raises(fxpay.JournalError):
                    quote(c, f"k{i}")
        assert requests_to(fxpay_sandbox, QUOTES) == 0
    finally:
        server.stop()


def test_appendfsync_everysec_is_accepted_with_one_warning(fxpay_sandbox: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    redis = need("redis")
    server = RedisServer(tmp_path)
    server.start()
    try:
        redis.Redis.from_url(server.url).config_set("appendfsync", "everysec")
        journal = fxpay.RedisJournal(server.url, prefix="everysec:")
        with caplog.at_level(logging.WARNING, logger="fxpay.journal"), fxpay_sandbox.client(journal=journal) as c:
            journal.create()
            for i in range(3):
                quote(c, f"k{i}")
        warned = [r for r in caplog.records if r.name == "fxpay.journal"]
        assert len(warned) == 1, warned
        assert "appendfsync everysec" in warned[0].getMessage()
        assert requests_to(fxpay_sandbox, QUOTES) == 3
    finally:
        server.stop()


def test_a_redis_that_refuses_config_is_accepted_with_one_warning(
    fxpay_sandbox: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A managed Redis renames or forbids CONFIG: the journal cannot check, says so once."""
    redis = need("redis")
    sock = tmp_path / "r.sock"
    proc = subprocess.Popen(
        [
            need_program("redis-server"),
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--dir",
            str(tmp_path),
            "--save",
            "",
            "--appendonly",
            "no",
            "--rename-command",
            "CONFIG",
            "",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"unix://{sock}?db=0"
        deadline = time.monotonic() + 30
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except (redis.ConnectionError, FileNotFoundError):
                assert time.monotonic() < deadline
                assert proc.poll() is None
                time.sleep(0.02)
        journal = fxpay.RedisJournal(url, prefix="managed:")
        with caplog.at_level(logging.WARNING, logger="fxpay.journal"), fxpay_sandbox.client(journal=journal) as c:
            journal.create()
            quote(c, "a")
            quote(c, "b")
        warned = [r for r in caplog.records if r.name == "fxpay.journal"]
        assert len(warned) == 1, warned
        assert "CONFIG GET refused" in warned[0].getMessage()
    finally:
        proc.kill()
        proc.wait(10)


# -- a claim that lands after its call gave up ---------------------------------------------


class SlowClaims(fxpay.MemoryJournal):
    """A journal whose claims answer `delay` seconds late (a disk or a network stalled)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def claim(self, entry: fxpay.JournalEntry) -> fxpay.JournalEntry | None:
        time.sleep(self.delay)
        return super().claim(entry)


def test_a_claim_that_lands_after_the_deadline_is_undone(fxpay_sandbox: Any) -> None:
    journal = SlowClaims(1.0)
    with fxpay_sandbox.client(journal=journal, deadline=0.3) as c:
        t0 = time.monotonic()
        with pytest.raises(fxpay.TimeoutError):
            quote(c, "late")
        took = time.monotonic() - t0
        assert took < 0.3 + 0.05, f"the call outlived its deadline by {took - 0.3:.3f} s"
        assert requests_to(fxpay_sandbox, QUOTES) == 0
        # The claim lands at 1 s and is undone at once: never pending, never unknown.
        seen = set()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            e = journal.get("late")
            seen.add(None if e is None else e.state)
            time.sleep(0.005)
        final = journal.get("late")
        assert final is not None, seen
        assert final.state == "released", seen
        assert "unknown" not in seen
        assert journal.unknown() == []
        journal.delay = 0
        qid = quote(c, "late")
        assert quote(c, "late") == qid
    assert requests_to(fxpay_sandbox, QUOTES) == 1


def test_a_redis_stopped_past_the_deadline_leaves_no_false_unknown(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """Redis SIGSTOPped while a keyed call claims: the call fails within its deadline with
    nothing sent; once Redis is back, the key is free again with no lease to wait out."""
    server = RedisServer(tmp_path)
    server.start()
    assert server.proc is not None
    try:
        journal = fxpay.RedisJournal(server.url, prefix="stall:", socket_timeout=1.0)
        journal.create()
        with fxpay_sandbox.client(journal=journal, deadline=0.5) as c:
            quote(c, "warm")  # the persistence check and the scripts, before the stall
            for key, stalled in (("k-short", 0.8), ("k-long", 2.5)):  # shorter, then longer than socket_timeout
                server.proc.send_signal(signal.SIGSTOP)
                try:
                    t0 = time.monotonic()
                    with pytest.raises((fxpay.TimeoutError, fxpay.JournalError)):
                        quote(c, key)
                    took = time.monotonic() - t0
                    time.sleep(max(0.0, stalled - took))
                finally:
                    server.proc.send_signal(signal.SIGCONT)
                assert took < 0.5 + 0.05, f"the call outlived its deadline by {took - 0.5:.3f} s"
                deadline = time.monotonic() + 5
                while True:
                    e = journal.get(key)
                    if e is None or e.state == "released":
                        break
                    assert time.monotonic() < deadline, f"{key} stayed {e.state}"
                    time.sleep(0.02)
                assert not [u.key for u in journal.unknown()]
            assert requests_to(fxpay_sandbox, QUOTES) == 1
            for key in ("k-short", "k-long"):
                qid = quote(c, key)
                assert quote(c, key) == qid
        assert requests_to(fxpay_sandbox, QUOTES) == 3
    finally:
        server.stop()


# -- no secret in an error -----------------------------------------------------------------


def test_a_pickled_idempotency_error_holds_no_callback_nonce(fxpay_sandbox: Any, tmp_path: Path) -> None:
    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    hook = "http://127.0.0.1:9/hook"  # never delivered to: nothing listens on the discard port
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        fxpay_sandbox.drop_next("/v1/payments/deals/spot", after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError) as unknown:
            c.create_spot_deal(**args, callback_url=hook, idempotency_key="spot")
        entry = journal.get("spot")
        assert entry is not None
        nonce = __import__("json").loads(entry.to_json())["nonce"]
        assert nonce
        assert len(nonce) >= 22
        with pytest.raises(fxpay.OutcomeUnknownError) as again:
            c.create_spot_deal(**args, callback_url=hook, idempotency_key="spot")
        other = deal_args(c)
        with pytest.raises(fxpay.KeyReusedError) as reused:
            c.create_spot_deal(**other, callback_url=hook, idempotency_key="spot")
        # In progress: a live holder of a key whose call waits on a slow answer.
        fxpay_sandbox.delay_next("/v1/payments/deals/spot", 1.5)
        t = threading.Thread(target=lambda: c.create_spot_deal(**other, callback_url=hook, idempotency_key="slow"))
        t.start()
        deadline = time.monotonic() + 10
        while journal.get("slow") is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(fxpay.InProgressError) as busy:
            c.create_spot_deal(**other, callback_url=hook, idempotency_key="slow")
        t.join(30)
        slow_nonce = __import__("json").loads(journal.get("slow").to_json())["nonce"]  # type: ignore[union-attr]
    for err, secret in ((unknown.value, nonce), (again.value, nonce), (reused.value, nonce), (busy.value, slow_nonce)):
        assert err.entry is not None
        data = pickle.dumps(err)
        assert secret.encode() not in data, type(err).__name__
        assert secret not in repr(err)
        assert secret not in str(err)
        assert secret not in repr(err.entry)
        back = pickle.loads(data)
        assert type(back) is type(err)
        assert str(back) == str(err)
        for field in ("key", "state", "operation", "result", "error", "deal_id"):
            assert getattr(back.entry, field) == getattr(err.entry, field), field
    # The entry itself, pickled on its own.
    stored = journal.get("spot")
    assert stored is not None
    assert nonce.encode() not in pickle.dumps(stored)
    assert pickle.loads(pickle.dumps(stored)).state == "unknown"
    # The journal still holds the nonce (a replay returns it; a receiver verifies with it).
    assert nonce in stored.to_json()


# -- what a lost answer keeps (issue 46 item 7) ----------------------------------------------


def test_an_unknown_outcome_keeps_the_lost_answers_request_id_and_its_cause(fxpay_sandbox: Any, tmp_path: Path) -> None:
    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    with fxpay_sandbox.client(journal=journal, max_retries=0) as c:
        args = deal_args(c)
        fxpay_sandbox.fail_next("/v1/payments/deals", 500)
        with pytest.raises(fxpay.OutcomeUnknownError) as e:
            c.create_deal(**args, idempotency_key="five-hundred")
        cause = e.value.__cause__
        assert isinstance(cause, fxpay.ServerError)
        assert cause.request_id
        assert e.value.request_id == cause.request_id
        back = pickle.loads(pickle.dumps(e.value))
        assert back.request_id == e.value.request_id
        # No answer at all: the cause is the lost connection, and there is no request id.
        args = deal_args(c)
        fxpay_sandbox.drop_next("/v1/payments/deals", after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError) as lost:
            c.create_deal(**args, idempotency_key="dropped")
        assert isinstance(lost.value.__cause__, fxpay.TransportError)
        assert lost.value.request_id is None


def test_an_entry_gives_its_request_as_a_mapping_and_its_pay_reference(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """The docs' reconcile loop reads plainly (issue 46 item 19): no json.loads of to_json()."""
    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c, amount="123.45")
        fxpay_sandbox.drop_next("/v1/payments/deals", after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError):
            c.create_deal(**args, idempotency_key="lost-deal")
        quote(c, "a-quote")
    (entry,) = journal.unknown()
    assert entry.pay_reference == "INV-1"
    request = entry.request
    assert request is not None
    assert request["quoteId"] == args["quote_id"]
    amount = request["beneficiaries"][0]["amount"]
    assert isinstance(amount, Decimal)
    assert amount == args["beneficiaries"][0].amount
    q = journal.get("a-quote")
    assert q is not None
    assert q.pay_reference is None
    assert q.request is not None
    assert q.request["buyCurrency"] == "USD"
