"""RedisJournal: a journal in Redis, shared by every process and machine that uses it."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from .. import _forks
from .._fxpay import JournalEntry, _NativeStore, _redis_scripts, _redis_store
from .._group_commit import UNANSWERED, _Claim, _GroupCommit
from .._later import _Later
from ..errors import JournalError
from ._base import (
    JournalBase,
    _check_entry,
    _check_key,
    _fails_closed,
    _OwnJournal,
    _result_waits,
    _seconds,
    _ServerRefused,
    logger,
)

__all__ = ["RedisJournal"]


# The error a script answers when the journal's identity key does not hold the identity this
# process opened (flushed, restarted empty, created again): the claim or swap is not made.
_NOT_THIS_JOURNAL = "FXPAYJOURNAL"

# The claim and swap scripts every Redis journal runs (the core's, crates/fxpay-core/src/journal/redis/texts.rs):
# SET NX, and compare-and-set, each only where the identity key holds the journal this process opened.
_CLAIM, _SWAP = _redis_scripts()


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _new_identity() -> str:
    import uuid

    return f"fxpay-journal:{uuid.uuid4()}"


def _lost_journal_advice(create: str) -> str:
    return (
        f"A journal is made once, by hand or in a deployment's migration step: {create}, or "
        "`python -m fxpay journal create URL`; never at every start-up. If a journal was here and was lost "
        "(flushed, truncated, restarted without its data, replaced by a new server), restore it from a "
        "backup first: creating a new one where a journal was lost sends every key it held again. Nothing was sent."
    )


def _redis_errors() -> Any:
    """redis-py's exceptions module (imported when a Redis journal is used)."""
    import redis.exceptions

    return redis.exceptions


@functools.cache
def _one_write(connection_class: type[Any]) -> type[Any]:
    """``connection_class`` sending a pipeline in one write: redis-py sends it in pieces of
    about 6 kB, and Redis may read, run and fsync its AOF for each piece apart (a group
    commit of 8 claims and their results, some 10 kB, was two or three fsyncs)."""

    class OneWrite(connection_class):  # type: ignore[misc]
        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            if isinstance(command, list) and len(command) > 1:
                command = [b"".join(command)]
            super().send_packed_command(command, check_health)

    OneWrite.__name__ = OneWrite.__qualname__ = connection_class.__name__
    return OneWrite


def _redis_not_recorded(prefix: str, key: str, result: str | None) -> None:
    """A result of the Redis journal under ``prefix`` found its key changed otherwise."""
    JournalBase._not_recorded(RedisJournal.__new__(RedisJournal), prefix, key, result)


def _redis_warning(message: str) -> None:
    """A warning about a Redis journal's server (each kind once per journal)."""
    logger.warning("%s", message)


class RedisJournal(_OwnJournal):
    """A journal in Redis, shared by every process and machine that uses it.

    ``url_or_client``: a ``redis.Redis`` or a URL (``redis://127.0.0.1:6379/0``);
    ``socket_timeout`` bounds each command of a client made from a URL, so an unreachable
    Redis fails closed quickly. Claims are ``SET NX`` (in a script that also indexes the
    key); swaps compare and set in one script. Keys are ``prefix + "k:" + key``.

    **A journal knows itself.** A journal is made once, by :meth:`create` (or ``python -m
    fxpay journal create URL``), which stores an identity under ``prefix + "journal"``.
    Opening a journal never makes one: a Redis that holds no identity under ``prefix`` (never
    created, or emptied by ``FLUSHALL``, a restart without its data, a new server), or
    another journal's, is a :class:`fxpay.JournalError` and nothing is sent. Every claim and
    every swap checks the identity inside its own script, so a flush under a live process is
    caught at its next claim.

    **Only a Redis that keeps its writes.** Every connection the journal makes is checked
    before its first command: a replica (``ROLE``) is refused (its writes are lost at the next
    resync), and with ``require_persistence`` (the default) ``appendonly no`` is refused (a
    Redis that forgets every key when it restarts, as most Celery brokers run).
    ``appendfsync everysec`` (or ``no``) is accepted with one warning that a power cut can lose
    the last claims; a Redis that refuses ``CONFIG`` (a managed one) is accepted with one
    warning. As the check runs on every new connection, a Redis restarted with other settings
    is caught at once. ``require_persistence=False`` skips the persistence check (tests, or a
    Redis whose persistence you vouch for). A client given is used through a connection pool
    of the journal's own, made with the client's settings.
    """

    def __init__(
        self,
        url_or_client: Any,
        *,
        prefix: str = "fxpay:journal:",
        socket_timeout: float = 5.0,
        require_persistence: bool = True,
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
        if not isinstance(require_persistence, bool):
            raise TypeError(f"require_persistence must be a bool, not {type(require_persistence).__name__}")
        socket_timeout = _seconds("socket_timeout", socket_timeout)
        self.prefix = prefix
        self._open = prefix + "open"
        self._id_key = prefix + "journal"
        # A journal made from a URL keeps its storage in fxpay's Rust core: a keyed call on it
        # never climbs into Python. One over a client given (or a TLS URL) runs here, on redis-py.
        self._store: _NativeStore | None = None
        if isinstance(url_or_client, str) and url_or_client.startswith(("redis://", "unix://")):
            from .. import _later

            self._store = _redis_store(
                url_or_client,
                prefix,
                require_persistence,
                socket_timeout,
                _later.RESULT_DELAY,
                _result_waits,
                functools.partial(_redis_not_recorded, prefix),
                _redis_warning,
            )
            _forks.register(self)
            return
        if isinstance(url_or_client, str):
            from .._redis import client_from_url

            url_or_client = client_from_url("RedisJournal", url_or_client, socket_timeout)
        elif not (hasattr(url_or_client, "register_script") and hasattr(url_or_client, "get")):
            raise TypeError(f"url_or_client must be a redis URL or a redis.Redis, not {type(url_or_client).__name__}")
        self._require_persistence = require_persistence
        # The identity of the journal this process opened (read on first use, or made by
        # `create()`); every claim and swap runs only where it is still the one stored.
        self._id: str | None = None
        self._check_lock = threading.Lock()
        self._warned: set[str] = set()
        # Clients inherited through a fork: kept, never used or closed in the child.
        self._inherited: list[Any] = []
        self._r = url_or_client
        self._use_own_pool()
        self._later = _Later.of(self._where())
        # This process's claims waiting for their round trip (made anew in a forked child).
        self._group = _GroupCommit()
        _forks.register(self)

    def _where(self) -> str:
        """This journal's place (server and prefix): the results waiting for it in this
        process are shared by every ``RedisJournal`` of that place. A client whose pool does
        not say where it connects (a cluster, a stand-in) is a place of its own: two such
        clients of two servers never share one."""
        pool = getattr(self._r, "connection_pool", None)
        kw = getattr(pool, "connection_kwargs", None) or {}
        if not kw:
            return f"redis-client:{id(self._r)}:{self.prefix}"
        return f"redis:{kw.get('host')}:{kw.get('port')}:{kw.get('path')}:{kw.get('db')}:{self.prefix}"

    # -- connections ---------------------------------------------------------------------

    def _use_own_pool(self) -> None:
        """A connection pool of the journal's own, made from the client's settings, whose
        every new connection is checked before its first command (:meth:`_vet`). A client
        without such settings (a cluster, a stand-in) is used as it is."""
        import redis

        pool = getattr(self._r, "connection_pool", None)
        if pool is not None and hasattr(pool, "connection_kwargs"):
            kwargs = dict(pool.connection_kwargs)
            ref = weakref.ref(self)

            def on_connect(conn: Any) -> None:
                conn.on_connect()
                journal = ref()
                if journal is None:
                    return
                try:
                    journal._vet(conn)
                except BaseException:
                    # Never left connected: the pool would hand it out again unchecked.
                    conn.disconnect()
                    raise

            kwargs["redis_connect_func"] = on_connect
            fresh = type(pool)(connection_class=_one_write(pool.connection_class), max_connections=pool.max_connections, **kwargs)
            self._r = redis.Redis(connection_pool=fresh)
        self._claim = self._r.register_script(_CLAIM)
        self._swap = self._r.register_script(_SWAP)
        self._scripts_loaded = False

    def _after_fork(self, *, child: bool) -> None:
        super()._after_fork(child=child)  # a store of the core's
        if child and self._store is None:
            self._check_lock = threading.Lock()
            # redis-py's pool makes itself anew in a child on first use, but (8.x) first takes
            # the inherited pool's lock, which a thread of the parent may have held at the
            # fork: the child would wait for ever (a hung child of a fork during 8 writing
            # threads, test_journal_holes.py). A new pool has no inherited lock. The inherited
            # client is kept, never closed here: its `__del__` closes its pool, which (making
            # itself anew first) would take that same inherited lock.
            self._inherited.append((self._r, self._claim, self._swap))
            self._use_own_pool()
            self._later = _Later.of(self._where())
            # A leader of the parent's group commit (or its claims in flight) is not the child's.
            self._group = _GroupCommit()

    def _warn_once(self, what: str, message: str, *args: Any) -> None:
        if what not in self._warned:
            self._warned.add(what)
            logger.warning(message, *args)

    def _vet(self, conn: Any) -> None:
        """Runs on every new connection, before its first command: refuses a replica, and
        (with ``require_persistence``) a Redis that would forget its keys when it restarts."""
        import redis

        try:
            conn.send_command("ROLE")
            role = conn.read_response()
        except redis.ResponseError as e:
            self._warn_once("role", "RedisJournal cannot read the Redis server's ROLE (%s); it is trusted to be a primary", e)
            role = None
        if role and _text(role[0]) != "master":
            raise _ServerRefused(
                f"RedisJournal refuses this Redis: it is a replica (ROLE {_text(role[0])}), whose writes are lost when it "
                "resyncs with its primary, and every key claimed there could be sent again. Give the journal the "
                "primary. Nothing was sent."
            )
        if not self._require_persistence:
            return
        try:
            conn.send_command("CONFIG", "GET", "append*")
            reply = conn.read_response()
        except redis.ResponseError as e:
            self._warn_once(
                "config",
                "RedisJournal cannot read the Redis server's persistence settings (CONFIG GET refused: %s); "
                "it is trusted to keep every write across a restart (appendonly yes, appendfsync always)",
                e,
            )
            return
        if isinstance(reply, dict):
            conf = {_text(k): _text(v) for k, v in reply.items()}
        else:
            items = list(reply or [])
            conf = {_text(items[i]): _text(items[i + 1]) for i in range(0, len(items) - 1, 2)}
        appendonly, appendfsync = conf.get("appendonly", ""), conf.get("appendfsync", "")
        if appendonly != "yes":
            raise _ServerRefused(
                f"RedisJournal refuses this Redis: its appendonly setting is {appendonly or 'not set'!r}, so it "
                "forgets every key when it restarts, and every payment claimed before would be sent again. "
                "Set 'appendonly yes' and 'appendfsync always' (redis.conf, or CONFIG SET and CONFIG REWRITE), "
                "or give RedisJournal(require_persistence=False) for a Redis whose keys may be lost (tests). "
                "Nothing was sent."
            )
        if appendfsync != "always":
            self._warn_once(
                "fsync",
                "RedisJournal: this Redis has appendfsync %s, so a power cut or a crash of its host can lose the "
                "claims of the last second, and their payments could be sent again; use appendfsync always",
                appendfsync or "unset",
            )

    def _identity(self) -> str:
        """The identity of the journal this process opened: read on first use. A Redis that
        holds none is a :class:`JournalError`."""
        if self._store is not None:
            return self._store.diagnostic("identity")
        if self._id is not None:
            return self._id
        with self._check_lock:
            if self._id is None:
                stored = self._r.get(self._id_key)
                if stored is None:
                    raise JournalError(
                        f"RedisJournal found no journal under prefix {self.prefix!r} in this Redis (no {self._id_key!r} "
                        "key): opening a journal never creates one. " + _lost_journal_advice("RedisJournal(url).create()")
                    )
                self._id = _text(stored)
            return self._id

    def _not_this_journal(self, e: Exception) -> JournalError | None:
        """The :class:`JournalError` for a script's identity refusal, else None."""
        text = str(e)
        if not text.startswith(_NOT_THIS_JOURNAL):
            return None
        found = text[len(_NOT_THIS_JOURNAL) :].strip()
        if not found:
            return JournalError(
                f"RedisJournal's identity key {self._id_key!r} is gone from this Redis (FLUSHALL or FLUSHDB, a key "
                "evicted or deleted, a restart without its data): the journal this process opened was lost, and "
                "it is not taken for a new one. " + _lost_journal_advice("RedisJournal(url).create()")
            )
        return JournalError(
            f"RedisJournal: this Redis now holds another journal under prefix {self.prefix!r} ({found}) than the "
            f"one this process opened ({self._id}): the journal was lost and made again while this process ran, "
            "and its keys are not this journal's. Restart the processes that use it once a person has checked "
            "what was lost. Nothing was sent."
        )

    def create(self) -> bool:
        """Makes this journal in its Redis: stores an identity under ``prefix + "journal"``
        if none is there. Run it once (by hand, or in a deployment's migration step), never at
        every start-up: on a Redis that lost its journal it would make a new, empty one, and
        every key the old one held could be sent again. It does nothing where this journal
        exists already, and is safe to run from many processes at once (``SET NX``). True
        when it made the journal, False when the journal was there."""
        if self._store is not None:
            return self._store.create()
        try:
            made = bool(self._r.set(self._id_key, _new_identity(), nx=True))
            stored = self._r.get(self._id_key)
        except _ServerRefused as e:
            raise JournalError(str(e)) from None
        except Exception as e:
            raise JournalError(f"RedisJournal.create() failed: {type(e).__name__}: {e}") from e
        if stored is None:
            raise JournalError(f"RedisJournal.create(): the identity key {self._id_key!r} vanished as it was made")
        with self._check_lock:
            if self._id is not None and self._id != _text(stored):
                raise JournalError(self._not_this_journal(Exception(f"{_NOT_THIS_JOURNAL} {_text(stored)}")).args[0])  # type: ignore[union-attr]
            self._id = _text(stored)
        return made

    def _k(self, key: str) -> str:
        return self.prefix + "k:" + key

    def _entry(self, raw: Any) -> JournalEntry | None:
        if raw is None:
            return None
        return JournalEntry.from_json(raw.decode() if isinstance(raw, bytes) else raw)

    def _scripted(self, script: Any, keys: list[str], args: list[str]) -> Any:
        import redis

        try:
            return script(keys=keys, args=args)
        except redis.ResponseError as e:
            refused = self._not_this_journal(e)
            if refused is not None:
                raise refused from None
            raise

    @_fails_closed("get")
    def get(self, key: str) -> JournalEntry | None:
        if self._store is not None:
            return self._store.get(_check_key(key))
        k = self._k(_check_key(key))
        self._identity()
        mine = self._later.get(key)  # before the read (see _Later.news)
        return self._later.news(self._entry(self._r.get(k)), mine)

    @_fails_closed("entries")
    def entries(self, keys: Iterable[str]) -> dict[str, JournalEntry]:
        wanted = [_check_key(k) for k in keys]
        if self._store is not None:
            return {e.key: e for e in self._store.entries(wanted)}
        self._check_still_here()
        out = {}
        for start in range(0, len(wanted), 1000):  # one MGET per 1,000 keys
            part = wanted[start : start + 1000]
            mine = self._later.waiting_now()  # before the read (see _Later.news)
            for key, raw in zip(part, self._r.mget([self._k(k) for k in part]), strict=True):
                e = self._later.news(self._entry(raw), mine.get(key))
                if e is not None:
                    out[key] = e
        return out

    def _swap_args(self, key: str, old: str, new: JournalEntry, text: str, old_result: str | None) -> tuple[list[str], list[str]]:
        index = self.prefix + "r:" + new.result if new.result and new.result != old_result else ""
        return [self._k(key), self._open, index, self._id_key], [old, text, key, new.state, self._identity()]

    def _queue_results(self, pipe: Any, results: list[tuple[str, str, JournalEntry, str]]) -> None:
        """Queues ``results`` on ``pipe``, each its own swap script, by its SHA (redis-py's
        own pipelined scripts cost a ``SCRIPT EXISTS`` round trip first)."""
        for key, old, new, text in results:
            keys, args = self._swap_args(key, old, new, text, JournalEntry.from_json(old).result)
            pipe.evalsha(self._swap.sha, len(keys), *keys, *args)

    def _piped(self, queue: Callable[[Any], None]) -> list[Any]:
        """The replies (an error as its exception) of one round trip of the commands
        ``queue`` puts on a pipeline, the scripts loaded first (once; again after a Redis
        that lost them answered ``NOSCRIPT``: a command that met it is the caller's to make
        again)."""
        import redis

        if not self._scripts_loaded:
            self._r.script_load(_CLAIM)
            self._r.script_load(_SWAP)
            self._scripts_loaded = True
        pipe = self._r.pipeline(transaction=False)
        queue(pipe)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
            self._scripts_loaded = False  # a Redis restarted meanwhile: loaded again next time
        return replies

    def _results_answered(self, results: list[tuple[str, str, JournalEntry, str]], replies: list[Any]) -> None:
        """The replies of the results' swaps: those written leave :class:`_Later`; one whose
        entry changed meanwhile is written over it if it is still this call's claim, else
        logged; an error keeps them all waiting."""
        if any(isinstance(r, Exception) for r in replies):
            self._later.missed(results)
            return
        self._later.landed(results)
        for (key, _old, new, text), reply in zip(results, replies, strict=True):
            if reply == 1:
                continue
            raw = self._r.get(self._k(key))
            stored = self._entry(raw)
            if (stored is not None and _text(raw) == text) or _Later.written_otherwise(stored, new):
                continue
            if _Later.still_its_claim(stored, new):
                keys, args = self._swap_args(key, _text(raw), new, text, stored.result)
                if self._scripted(self._swap, keys, args) == 1:
                    continue
            self._not_recorded(self.prefix, key, new.result)

    def _flush_results(self) -> None:
        """Writes the results waiting now in one round trip (the flusher's, and exit's)."""
        results = self._later.taken()
        if not results:
            return
        try:
            self._results_answered(results, self._piped(lambda pipe: self._queue_results(pipe, results)))
        except Exception:
            self._later.missed(results)
            logger.debug("RedisJournal: writing the results waiting failed; they are tried again", exc_info=True)
        if self._later.results:
            _Later.retry(self)

    def close(self) -> None:
        """Writes the results of this process's keyed calls that wait for their commit (a
        process about to end with ``os._exit``, which skips the exit's own writing). The
        connections stay: the client's or the pool's own."""
        if self._store is not None:
            self._store.flush()
            return
        self._flush_results()

    def _check_still_here(self) -> None:
        """For the readings people act on (``unknown()``, a payout's progress): the journal
        this process opened is still the one stored, so an emptied Redis never reads as a
        journal with nothing open."""
        mine = self._identity()
        stored = self._r.get(self._id_key)
        if stored is None or _text(stored) != mine:
            refused = self._not_this_journal(Exception(f"{_NOT_THIS_JOURNAL} {'' if stored is None else _text(stored)}"))
            assert refused is not None
            raise refused

    @_fails_closed("claim")
    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        e = _check_entry(entry)
        if self._store is not None:
            return self._store.claim(e)
        # The claim reaches Redis even when this process holds the key's result: the
        # identity is checked with every claim (a FLUSHALL under a live process is caught).
        ident = self._identity()
        keys, args = [self._k(e.key), self._open, self._id_key], [e.to_json(), e.key, ident]
        # With the claims of this process's other threads waiting at once, and the results
        # waiting: one round trip, so one AOF write and fsync (see fxpay._group_commit).
        claimed = self._group.run(_Claim(e.key, (keys, args)), self._commit_claims).reply
        if claimed is UNANSWERED:  # no reply is never a claim made (SET NX's own is None)
            raise JournalError(f"RedisJournal.claim(): the commit gave no answer for key {e.key!r}; nothing was sent")
        if isinstance(claimed, _redis_errors().NoScriptError):
            return self._later.news(self._entry(self._scripted(self._claim, keys, args)))  # loads it, and claims
        if isinstance(claimed, Exception):
            import redis

            refused = self._not_this_journal(claimed) if isinstance(claimed, redis.ResponseError) else None
            if refused is not None:
                raise refused
            raise claimed
        return self._later.news(self._entry(claimed))

    def _commit_claims(self, batch: list[_Claim]) -> None:
        """The group commit of ``batch``'s claims, with the results waiting riding it: one
        pipeline (Redis reads it in one round and writes its AOF once). Each claim's reply is
        its own (an error reply as its exception); a pipeline that fails fails them all."""
        results = self._later.taken()
        if not results and len(batch) == 1:
            keys, args = batch[0].args
            try:
                batch[0].reply = self._claim(keys=keys, args=args)  # loads the script if need be
            except Exception as e:
                batch[0].reply = e
        else:

            def queue(pipe: Any) -> None:
                self._queue_results(pipe, results)
                for c in batch:
                    keys, args = c.args
                    pipe.evalsha(self._claim.sha, len(keys), *keys, *args)

            try:
                replies = self._piped(queue)
            except BaseException:
                self._later.missed(results)
                raise
            for c, reply in zip(batch, replies[len(results) :], strict=True):
                c.reply = reply
            self._results_answered(results, replies[: len(results)])
        for c in batch:
            c.claimed = c.reply is None  # SET NX made it: nothing stored before

    @_fails_closed("swap")
    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        if self._store is not None:
            return self._store.swap(*self._swap_pair(old, new))
        ready = self._swap_begun(old, new)  # a call's result rides the next claim's round trip
        if ready is None:
            return True
        o, n, old_text, text = ready
        keys, args = self._swap_args(o.key, old_text, n, text, o.result)
        return bool(self._scripted(self._swap, keys, args) == 1)

    def _find_stored(self, result: str) -> JournalEntry | None:
        self._identity()
        key = self._r.get(self.prefix + "r:" + result)
        if key is None:
            return None
        # The index outlives a result swapped away (an undo): the key's entry now is the
        # answer only while it still holds that result.
        got = self.get(key.decode() if isinstance(key, bytes) else key)
        return got if got is not None and got.result == result else None

    @_fails_closed("candidates")
    def candidates(self) -> list[JournalEntry]:
        if self._store is not None:
            return self._store.candidates()
        self._check_still_here()
        keys = sorted(k.decode() if isinstance(k, bytes) else k for k in self._r.smembers(self._open))
        out = []
        for key in keys:
            e = self.get(key)  # a result waiting here reads done
            if e is not None and e.state in ("pending", "unknown"):
                out.append(e)
        return out

    def __repr__(self) -> str:
        return f"RedisJournal(prefix={self.prefix!r})"
