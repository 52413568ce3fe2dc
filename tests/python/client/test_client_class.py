"""`fxpay.Client` and `fxpay.UserSession` are pyo3 classes of `fxpay._fxpay`, used as users of a
Python class expect: context managers (sync and async), `from_env`, subclasses, weak references,
and a `TypeError` naming the parameter for an argument of a wrong type."""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import warnings
import weakref
from pathlib import Path
from typing import Any

import pytest

import fxpay
from fxpay import _fxpay
from fxpay.testing import Cassette, Sandbox

UUID = "3f2b6a1e-9c1d-4d7a-8b0e-2f6f1c2d3e4f"


@pytest.fixture(scope="module")
def sb() -> Any:
    with Sandbox() as sandbox:
        yield sandbox


def user_token(sb: Sandbox, c: fxpay.Client) -> fxpay.Token:
    auth = c.authorization_url(sb.redirect_uri)
    return c.exchange_code(auth, sb.approve(auth.url))


# -- identity ---------------------------------------------------------------------------------


def test_client_and_user_session_are_pyclasses_of_the_compiled_module(sb: Sandbox) -> None:
    assert fxpay.Client is _fxpay.Client
    assert fxpay.UserSession is _fxpay.UserSession
    assert fxpay.Client.__module__ == "fxpay._fxpay"
    assert fxpay.UserSession.__module__ == "fxpay._fxpay"
    c = sb.client()
    assert type(c) is _fxpay.Client
    s = c.user_session(user_token(sb, c))
    assert type(s) is _fxpay.UserSession
    # No Python facade and no private core class remain.
    assert not hasattr(_fxpay, "CoreClient")
    assert not hasattr(_fxpay, "CoreUserSession")
    with pytest.raises(ModuleNotFoundError):
        __import__("fxpay._client")
    assert "client_id" in (fxpay.Client.__text_signature__ or "")
    assert fxpay.Client.__doc__
    assert fxpay.Client.get_quote.__doc__


def test_repr_shows_no_secret(sb: Sandbox) -> None:
    c = fxpay.Client("cid", "s3cr3t-value", base_url=sb.base_url)
    assert repr(c) == f"Client(client_id='cid', base_url={sb.base_url!r})"
    assert "s3cr3t" not in repr(c)


def test_async_methods_return_coroutines(sb: Sandbox) -> None:
    c = sb.client()
    qid = c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    call = c.get_quote_async(qid)
    assert asyncio.iscoroutine(call)
    # Nothing is sent before it is awaited; asyncio.run and create_task take it.
    before = sb.stats()["requests"]
    call.close()
    assert sb.stats()["requests"] == before
    assert asyncio.run(c.get_quote_async(qid)).id == qid

    async def main() -> str:
        task = asyncio.create_task(c.get_quote_async(qid))
        return (await task).id

    assert asyncio.run(main()) == qid
    spent = c.get_quote_async(qid)
    assert asyncio.run(spent).id == qid
    with pytest.raises(RuntimeError, match="reuse"):
        spent.send(None)


def _thrown(coro: Any, *args: Any) -> BaseException:
    """What ``coro.throw(*args)`` raises (the two- and three-argument forms are deprecated
    since 3.12, and still taken)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            coro.throw(*args)
        except BaseException as e:
            return e
    raise AssertionError(f"{coro!r}.throw{args!r} raised nothing")


def test_throw_raises_what_a_python_coroutine_raises(sb: Sandbox) -> None:
    """Each form of ``throw``: the class alone, with None, with a value to build it from,
    with an instance of it, an instance alone. An awaited call's coroutine raises what the
    coroutine of an ``async def`` raises: the same class, arguments and, for an instance
    given, the same object."""
    c = sb.client()

    async def native() -> None:
        pass

    given = ValueError("given")
    forms: list[tuple[Any, ...]] = [(ValueError,), (ValueError, None), (ValueError, "boom"), (ValueError, given), (given,)]
    for form in forms:
        want = _thrown(native(), *form)
        got = _thrown(c.get_quote_async(UUID), *form)
        assert type(got) is type(want), (form, got, want)
        assert got.args == want.args, (form, got.args, want.args)
        if given in form:
            assert got is given, form


def test_a_closed_or_thrown_call_cannot_be_started_later(sb: Sandbox) -> None:
    """``close()`` and ``throw()`` end a call's coroutine before its first step as they end
    an ``async def``'s: a later step raises "cannot reuse", and nothing is sent."""
    c = sb.client()
    before = sb.stats()["requests"]
    closed = c.get_quote_async(UUID)
    closed.close()
    thrown = c.get_quote_async(UUID)
    _thrown(thrown, ValueError)
    for call in (closed, thrown):

        async def step(call: Any = call) -> None:
            call.send(None)

        with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
            asyncio.run(step())
    assert sb.stats()["requests"] == before


def test_a_calls_coroutine_says_which_call_it_is(sb: Sandbox) -> None:
    call = sb.client().get_quote_async(UUID)
    assert repr(call) == "<fxpay call get_quote_async>"
    call.close()


# -- from_env ---------------------------------------------------------------------------------


def test_from_env_uses_all_three_variables_and_passes_keywords_on(sb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FXPAY_CLIENT_ID", sb.client_id)
    monkeypatch.setenv("FXPAY_CLIENT_SECRET", sb.client_secret)
    monkeypatch.setenv("FXPAY_BASE_URL", sb.base_url)
    c = fxpay.Client.from_env(max_retries=0)
    assert (c.client_id, c.base_url) == (sb.client_id, sb.base_url)
    issued = sb.stats()["tokens_issued"]["client_credentials"]
    # FXPAY_BASE_URL is really used: the call reaches this sandbox, with the secret from the environment.
    assert c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    assert sb.stats()["tokens_issued"]["client_credentials"] == issued + 1
    monkeypatch.setenv("FXPAY_CLIENT_SECRET", "wrong")
    with pytest.raises(fxpay.OAuthError, match="invalid_client"):
        fxpay.Client.from_env().create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    with pytest.raises(TypeError, match="timeout"):
        fxpay.Client.from_env(timeout="30")
    with pytest.raises(TypeError, match="base_url"):
        fxpay.Client.from_env(base_url=sb.base_url)
    for name in ("FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET", "FXPAY_BASE_URL"):
        with monkeypatch.context() as m:
            m.delenv(name)
            with pytest.raises(fxpay.ConfigurationError, match=name):
                fxpay.Client.from_env()


# -- context managers -------------------------------------------------------------------------


def test_with_closes_the_client_and_its_sessions(sb: Sandbox) -> None:
    with sb.client() as c:
        assert isinstance(c, fxpay.Client)
        assert not c.closed
        s = c.user_session(user_token(sb, c))
        assert s.list_virtual_accounts() is not None
    assert c.closed
    assert s.closed
    with pytest.raises(fxpay.ConfigurationError, match="Client is closed"):
        s.list_virtual_accounts()
    with pytest.raises(fxpay.ConfigurationError, match="closed"):
        c.get_quote(UUID)
    with pytest.raises(fxpay.ConfigurationError, match="closed"):
        c.get_quote_async(UUID)
    c.close()  # twice is harmless


def test_async_with_and_aclose(sb: Sandbox) -> None:
    async def main() -> None:
        c = sb.client()
        entered = c.__aenter__()
        assert asyncio.iscoroutine(entered)
        async with c as same:
            assert same is c
            qid = await c.create_quote_async(buy_currency="USD", buy_amount=2, sell_currency="EUR")
            token = await c.exchange_code_async(*_auth_and_callback(sb, c))
            async with c.user_session(token) as s:
                assert isinstance(await s.list_virtual_accounts_async(), list)
            assert s.closed
            assert not c.closed
            with pytest.raises(fxpay.ConfigurationError, match="UserSession is closed"):
                await s.list_virtual_accounts_async()
        entered.close()
        assert c.closed
        with pytest.raises(fxpay.ConfigurationError, match="closed"):
            await c.get_quote_async(qid)
        d = sb.client()
        assert await d.aclose() is None
        assert d.closed

    asyncio.run(main())


def _auth_and_callback(sb: Sandbox, c: fxpay.Client) -> tuple[fxpay.AuthorizationRequest, str]:
    auth = c.authorization_url(sb.redirect_uri)
    return auth, sb.approve(auth.url)


def test_user_session_with_and_closed_session_cannot_be_entered(sb: Sandbox) -> None:
    c = sb.client()
    with c.user_session(user_token(sb, c)) as s:
        assert not s.closed
    assert s.closed
    assert "closed" in repr(s)
    with pytest.raises(fxpay.ConfigurationError, match="closed"):
        s.__enter__()
    assert not c.closed


def test_a_recording_cassette_is_written_when_the_client_closes(sb: Sandbox, tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    cas = Cassette(path, mode="record")
    with fxpay.Client(sb.client_id, sb.client_secret, base_url=sb.base_url, cassette=cas) as c:
        c.create_quote(buy_currency="USD", buy_amount=3, sell_currency="EUR")
        assert not path.exists()
    assert path.exists()
    assert Cassette(path).recorded == 2


# -- subclasses and weak references -----------------------------------------------------------


class MyClient(fxpay.Client):
    """A subclass with a constructor of its own, as users write them."""

    def __init__(self, sb: Sandbox, *, tag: str) -> None:
        super().__init__(sb.client_id, sb.client_secret, base_url=sb.base_url, max_retries=0)
        self.tag = tag

    def quote_of(self, amount: int) -> fxpay.Quote:
        return self.get_quote(self.create_quote(buy_currency="USD", buy_amount=amount, sell_currency="EUR"))


def test_a_subclass_works_like_the_client(sb: Sandbox) -> None:
    c = MyClient(sb, tag="t")
    assert isinstance(c, fxpay.Client)
    assert c.tag == "t"
    assert c.quote_of(4).buy_amount == 4
    assert repr(c).startswith("MyClient(client_id=")

    async def main() -> str:
        async with c:
            return (await c.get_quote_async(c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR"))).id

    assert asyncio.run(main())
    assert c.closed

    class FromEnv(fxpay.Client):
        pass

    assert type(FromEnv("id", "secret", base_url=sb.base_url)) is FromEnv
    # A subclass whose __init__ forgets to call the client's gets a clear error, not a crash.

    class Forgetful(fxpay.Client):
        def __init__(self) -> None:
            pass

    with pytest.raises(fxpay.ConfigurationError, match="not initialised"):
        Forgetful().get_quote(UUID)
    with pytest.raises(fxpay.ConfigurationError, match="initialised already"):
        fxpay.Client.__init__(c, "id", "secret", base_url=sb.base_url)


def test_weak_references(sb: Sandbox) -> None:
    c = sb.client()
    s = c.user_session(user_token(sb, c))
    refs = [weakref.ref(c), weakref.ref(s), weakref.ref(MyClient(sb, tag="x"))]
    assert refs[0]() is c
    assert refs[1]() is s
    del c, s
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


# -- a wrong type is a TypeError naming the parameter -----------------------------------------


class NotAStore:
    def load(self, key: str) -> None:
        return None


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(timeout="30"), "timeout"),
        (dict(timeout="x"), "timeout"),
        (dict(timeout=None), "timeout"),
        (dict(timeout=True), "timeout"),
        (dict(max_retries=1.0), "max_retries"),
        (dict(max_retries="2"), "max_retries"),
        (dict(token_store=NotAStore()), "token_store"),
        (dict(cassette="c.json"), "cassette"),
        (dict(ca_bundle=3), "ca_bundle"),
        (dict(user_agent=b"app"), "user_agent"),
        (dict(base_url=None), "base_url"),
    ],
)
def test_constructor_type_errors_name_the_parameter(kwargs: dict[str, Any], name: str) -> None:
    args: dict[str, Any] = {"base_url": "http://127.0.0.1:1", **kwargs}
    with pytest.raises(TypeError, match=name):
        fxpay.Client("id", "secret", **args)


def test_value_errors_stay_configuration_errors() -> None:
    with pytest.raises(fxpay.ConfigurationError, match="timeout"):
        fxpay.Client("id", "secret", base_url="http://127.0.0.1:1", timeout=0)
    with pytest.raises(fxpay.ConfigurationError, match="timeout"):
        fxpay.Client("id", "secret", base_url="http://127.0.0.1:1", timeout=10**400)
    with pytest.raises(fxpay.ConfigurationError, match="max_retries"):
        fxpay.Client("id", "secret", base_url="http://127.0.0.1:1", max_retries=11)


def test_method_type_errors_name_the_parameter(sb: Sandbox) -> None:
    c = sb.client()
    before = sb.stats()["requests"]
    ok = fxpay.DealBeneficiary(UUID, "10", "Invoice", "INV-1")
    cases: list[tuple[str, Any]] = [
        ("buy_amount", lambda f: f(buy_currency="USD", buy_amount=[1], sell_currency="EUR")),
        ("beneficiaries", lambda f: f(buy_currency="USD", buy_amount=1, sell_currency="EUR", beneficiaries="1")),
    ]
    for name, call in cases:
        for f in (c.create_quote, c.create_quote_async):
            with pytest.raises(TypeError, match=name):
                call(f)
    for f in (c.create_deal, c.create_deal_async, c.create_spot_deal, c.create_spot_deal_async):
        with pytest.raises(TypeError, match="beneficiaries must be a sequence"):
            f(quote_id=UUID, funding_source="Own account", beneficiaries=ok)
        with pytest.raises(TypeError, match=r"beneficiaries\[1\]"):
            f(quote_id=UUID, funding_source="Own account", beneficiaries=[ok, {"amount": 1}])
        with pytest.raises(TypeError, match="beneficiaries must be a sequence"):
            f(quote_id=UUID, funding_source="Own account", beneficiaries="abc")
    for g in (c.exchange_code, c.exchange_code_async):
        with pytest.raises(TypeError, match="auth"):
            g({"url": "u", "state": "s"}, "code=x&state=s")
    for h in (c.create_beneficiary, c.create_beneficiary_async):
        with pytest.raises(TypeError, match="beneficiary"):
            h({"currency": "AUD"})
    with pytest.raises(TypeError, match="pkce"):
        c.authorization_url(sb.redirect_uri, pkce="yes")
    with pytest.raises(TypeError, match="on_token"):
        c.user_session(
            fxpay.Token(access_token="a", token_type="Bearer", expires_in=1, expires_at=dt.datetime.now(dt.timezone.utc)),
            on_token=3,  # type: ignore[arg-type]
        )
    assert sb.stats()["requests"] == before


# -- the GIL ----------------------------------------------------------------------------------


def test_a_blocking_call_releases_the_gil_while_it_waits(sb: Sandbox) -> None:
    import threading
    import time

    c = sb.client()
    qid = c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    route = "GET /v1/payments/quotes/{id}"
    before = sb.stats()["paths"][route]
    sb.delay_next("GET /v1/payments/quotes/*", 5)
    returned_at: list[float] = []

    def read() -> None:
        c.get_quote(qid)
        returned_at.append(time.monotonic())

    t = threading.Thread(target=read)
    t.start()
    # This thread runs Python code (asking the sandbox) while the read is held there for 5 s,
    # and sees it arrive long before it returns. A call holding the GIL while it waits
    # would keep this thread from running until the read had returned.
    while sb.stats()["paths"][route] == before:
        pass
    seen_at = time.monotonic()
    t.join()
    assert returned_at[0] - seen_at > 1.0, "this thread could not run while the call waited"
