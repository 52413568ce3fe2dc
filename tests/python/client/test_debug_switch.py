"""Whether a call writes DEBUG lines follows the ``fxpay`` logger exactly as
``Logger.isEnabledFor(DEBUG)`` would answer at the moment the call starts: its level (both
ways), ``logging.disable``, the logger's ``disabled`` flag and a logger class of its own.
The question is the public one, ``isEnabledFor(DEBUG)``, asked once per call (issue 55: no
private name of ``logging``, such as the logger's ``_cache``, is read). Real HTTP over
loopback."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from fxpay.testing import Sandbox


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lines() -> Iterator[_Lines]:
    log = logging.getLogger("fxpay")
    handler, level, disabled = _Lines(), log.level, log.disabled
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.disabled = disabled
        logging.disable(logging.NOTSET)


def _logged(sb: Sandbox, lines: _Lines, qid: str) -> int:
    """How many DEBUG lines one call writes."""
    before = len(lines.lines)
    with sb.client() as c:
        c.get_quote(qid)
    return len([line for line in lines.lines[before:] if f"quotes/{qid} -> 200" in line])


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


@pytest.fixture
def qid(sb: Sandbox) -> str:
    with sb.client() as c:
        return c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")


def test_the_level_is_followed_both_ways_call_by_call(sb: Sandbox, lines: _Lines, qid: str) -> None:
    log = logging.getLogger("fxpay")
    log.setLevel(logging.WARNING)
    assert _logged(sb, lines, qid) == 0
    log.setLevel(logging.DEBUG)
    assert _logged(sb, lines, qid) == 1
    log.setLevel(logging.INFO)
    assert _logged(sb, lines, qid) == 0
    # The parent's level, when the logger has none of its own.
    log.setLevel(logging.NOTSET)
    root, was = logging.getLogger(), logging.getLogger().level
    try:
        root.setLevel(logging.DEBUG)
        assert _logged(sb, lines, qid) == 1
        root.setLevel(logging.ERROR)
        assert _logged(sb, lines, qid) == 0
    finally:
        root.setLevel(was)


def test_logging_disable_and_the_disabled_flag_silence_it(sb: Sandbox, lines: _Lines, qid: str, monkeypatch: pytest.MonkeyPatch) -> None:
    log = logging.getLogger("fxpay")
    # `Logger.debug` would drop a line itself: a call that is off must not even write one.
    written: list[str] = []
    debug = log.debug

    def counting(msg: str, *args: object) -> None:
        written.append(msg % args)
        debug(msg, *args)

    monkeypatch.setattr(log, "debug", counting)
    log.setLevel(logging.DEBUG)
    assert _logged(sb, lines, qid) == 1
    logging.disable(logging.DEBUG)
    assert _logged(sb, lines, qid) == 0
    logging.disable(logging.NOTSET)
    assert _logged(sb, lines, qid) == 1
    # `disabled` (set by logging.config's disable_existing_loggers) leaves the cache as it is.
    log.disabled = True
    assert _logged(sb, lines, qid) == 0
    assert len([w for w in written if f"quotes/{qid} -> 200" in w]) == 2, written
    log.disabled = False
    assert _logged(sb, lines, qid) == 1


def test_the_loggers_public_method_is_asked_once_per_call(sb: Sandbox, lines: _Lines, qid: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # DEBUG off, so that nothing but the switch asks (`Logger.debug` asks too).
    log = logging.getLogger("fxpay")
    log.setLevel(logging.INFO)
    assert _logged(sb, lines, qid) == 0
    asked: list[int] = []
    answer = [False]

    def counting(self: logging.Logger, level: int) -> bool:
        # The fxpay logger's answers only: a thread of another test still running in this
        # process may log through a logger of its own meanwhile.
        if self is log:
            asked.append(level)
            return answer[0]
        return False

    monkeypatch.setattr(logging.Logger, "isEnabledFor", counting)
    assert [_logged(sb, lines, qid) for _ in range(3)] == [0, 0, 0]
    # Once per call, though the logger's cache holds an answer for DEBUG (no private name is
    # read instead of the method).
    assert asked.count(logging.DEBUG) == 3, asked
    # The method's answer is the one followed: yes, though the level says no.
    answer[0] = True
    assert _logged(sb, lines, qid) == 1


def test_a_logger_class_of_its_own_is_asked_through_its_method(sb: Sandbox, qid: str) -> None:
    # Its cache says no (the stock answer at WARNING), its method says yes: the method wins.
    code = """
    import io, json, logging, sys
    class Loud(logging.Logger):
        def isEnabledFor(self, level):
            super().isEnabledFor(level)
            return True
    logging.setLoggerClass(Loud)
    log = logging.getLogger("fxpay")
    log.setLevel(logging.WARNING)
    stream = io.StringIO()
    log.addHandler(logging.StreamHandler(stream))
    import fxpay
    base, cid, secret, qid = sys.argv[1:5]
    with fxpay.Client(cid, secret, base_url=base) as c:
        for _ in range(2):
            c.get_quote(qid)
    print(json.dumps([type(log).__name__, log._cache, stream.getvalue().splitlines()]))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), sb.base_url, sb.client_id, sb.client_secret, qid],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    name, cache, logged = json.loads(done.stdout)
    assert (name, cache) == ("Loud", {"10": False})
    assert len([line for line in logged if f"quotes/{qid} -> 200" in line]) == 2, logged
