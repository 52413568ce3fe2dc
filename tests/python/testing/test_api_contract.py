"""A black-box check of the public Python contract (the surface docs and users program
against): every name, signature (parameter names, kinds and defaults), default, model
attribute, exception class and stated behaviour of that contract, called exactly as written
there, against the real in-process sandbox (``fxpay.testing.Sandbox``) over loopback.

Claims with a deeper test elsewhere are checked here once more in their plainest form, so a
drift of the surface itself (a renamed keyword, a lost default, a missing twin) fails here.
Hostile inputs: every public call gets at least one wrong type (a ``TypeError`` naming the
parameter) and one wrong value (an ``fxpay.FxPayError``), and no request leaves for either.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import inspect
import json
import logging
import os
import pickle
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import fxpay
import fxpay.testing

from conftest import MODEL_NAMES, all_at_once, login, make_beneficiary

REQUIRED = inspect.Parameter.empty
POS = inspect.Parameter.POSITIONAL_OR_KEYWORD
KW = inspect.Parameter.KEYWORD_ONLY
MISSING_UUID = "00000000-0000-4000-8000-000000000000"
FUNDING = "Own account"


@pytest.fixture
def sb() -> Iterator[fxpay.testing.Sandbox]:
    with fxpay.testing.Sandbox() as sandbox:
        yield sandbox


@pytest.fixture
def c(sb: fxpay.testing.Sandbox) -> Iterator[fxpay.Client]:
    with sb.client() as client:
        yield client


def sent(sb: fxpay.testing.Sandbox) -> tuple[int, int]:
    """Requests and token requests the sandbox has answered so far."""
    stats = sb.stats()
    return stats["requests"], stats["token_requests"]


def quote_id(c: fxpay.Client, amount: object = "100", buy: str = "AUD", sell: str = "USD") -> str:
    return c.create_quote(buy_currency=buy, buy_amount=amount, sell_currency=sell)


def deal_line(c: fxpay.Client, qid: str) -> fxpay.DealBeneficiary:
    """A beneficiary who receives the quote's sell currency, for the quote's sell amount."""
    q = c.get_quote(qid)
    address = fxpay.Address("1 Main St", "Springfield", "IL", "62701", "US")
    bid = c.create_beneficiary(make_beneficiary(currency=q.sell_currency, address=address))
    return fxpay.DealBeneficiary(bid, q.sell_amount, "Invoice", "INV-1")


# -- signatures --------------------------------------------------------------------------------

# (name, kind, default) as the contract writes them; REQUIRED: no default.
Spec = list[tuple[str, Any, Any]]

# create_deal's parameters, and create_spot_deal's (the same, with the callback's two before
# the key); pay_out and pay_out_iter differ in progress's default and in order.
DEAL: Spec = [("quote_id", KW, REQUIRED), ("funding_source", KW, REQUIRED), ("beneficiaries", KW, REQUIRED), ("channel", KW, None)]
KEY: Spec = [("idempotency_key", KW, None)]
CALLBACK: Spec = [("callback_url", KW, None), ("callback_nonce", KW, None)]
ROWS: Spec = [("rows", POS, REQUIRED), ("funding_source", KW, REQUIRED), ("concurrency", KW, 8)]

CLIENT_SIGNATURES: dict[str, Spec] = {
    "with_options": [("timeout", KW, None), ("max_retries", KW, None), ("deadline", KW, None)],
    "create_quote": [
        ("buy_currency", KW, REQUIRED),
        ("buy_amount", KW, REQUIRED),
        ("sell_currency", KW, REQUIRED),
        ("beneficiaries", KW, 1),
        *KEY,
    ],
    "get_quote": [("quote_id", POS, REQUIRED)],
    "create_beneficiary": [("beneficiary", POS, REQUIRED), *KEY],
    "create_deal": [*DEAL, *KEY],
    "create_spot_deal": [*DEAL, *CALLBACK, *KEY],
    "authorization_url": [("redirect_uri", POS, REQUIRED), ("state", KW, None), ("scope", KW, "gca-aisp"), ("pkce", KW, True)],
    "exchange_code": [("auth", POS, REQUIRED), ("callback", POS, REQUIRED)],
    "refresh_token": [("refresh_token", POS, REQUIRED)],
    "user_session": [("token", POS, REQUIRED), ("on_token", KW, None)],
    "pay_out": [*ROWS, ("progress", KW, True), ("max_rate", KW, None)],
    "pay_out_iter": [*ROWS, ("max_rate", KW, None), ("progress", KW, False)],
    "close": [],
    "aclose": [],
}

# Every method above that sends a request (each has an _async twin).
NETWORK_METHODS = [n for n in CLIENT_SIGNATURES if n not in ("with_options", "authorization_url", "user_session", "close", "aclose")]


def parameters(f: Callable[..., Any]) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(f).parameters.values() if p.name not in ("self", "cls")]


def assert_signature(f: Callable[..., Any], spec: Spec) -> None:
    """Every parameter of ``spec`` is there, in its order, kind and default; anything more is a
    keyword-only parameter with a default (a design extra the contract leaves open)."""
    actual = {p.name: p for p in parameters(f)}
    for name, kind, default in spec:
        assert name in actual, f"{f.__qualname__} has no parameter {name!r}: {list(actual)}"
        p = actual[name]
        assert (p.kind, p.default) == (kind, default), f"{f.__qualname__}({name}): {p.kind} = {p.default!r}"
        assert type(p.default) is type(default), f"{f.__qualname__}({name}) default {p.default!r}"
    named = [n for n, _, _ in spec]
    assert [p.name for p in parameters(f) if p.name in named] == named, f"{f.__qualname__}: order"
    extras = [p for p in parameters(f) if p.name not in named]
    assert all(p.kind == KW and p.default is not REQUIRED for p in extras), f"{f.__qualname__}: {extras}"


@pytest.mark.parametrize("name", sorted(CLIENT_SIGNATURES))
def test_client_methods_take_the_contracts_parameters_and_defaults(name: str) -> None:
    assert_signature(getattr(fxpay.Client, name), CLIENT_SIGNATURES[name])


def test_pay_out_shows_its_real_defaults_not_ellipsis() -> None:
    """``pay_out(..., concurrency: int = 8, progress=True)``: the defaults read back as such
    (they were ``Ellipsis`` in ``__text_signature__`` before)."""
    for name in ("pay_out", "pay_out_async"):
        ps = {p.name: p.default for p in parameters(getattr(fxpay.Client, name))}
        assert (ps["concurrency"], ps["progress"], ps["max_rate"]) == (8, True, None), name


@pytest.mark.parametrize("name", NETWORK_METHODS)
def test_every_network_method_has_an_async_twin_with_the_same_parameters(name: str) -> None:
    sync, twin = getattr(fxpay.Client, name), getattr(fxpay.Client, name + "_async")
    assert inspect.signature(twin) == inspect.signature(sync)
    s = fxpay.UserSession
    assert inspect.signature(s.list_virtual_accounts_async) == inspect.signature(s.list_virtual_accounts)


def test_the_client_constructor_takes_the_contracts_parameters_and_defaults() -> None:
    spec: Spec = [
        ("client_id", POS, REQUIRED),
        ("client_secret", POS, REQUIRED),
        ("base_url", KW, REQUIRED),
        ("timeout", KW, 30.0),
        ("max_retries", KW, 2),
        ("token_store", KW, None),
        ("ca_bundle", KW, None),
        ("cassette", KW, None),
        ("journal", KW, None),
        ("deadline", KW, None),
        ("client_cert", KW, None),
        ("client_key", KW, None),
        ("proxy", KW, None),
        ("rate_limit", KW, None),
    ]
    actual = {p.name: p for p in parameters(fxpay.Client)}
    for name, kind, default in spec:
        assert (actual[name].kind, actual[name].default) == (kind, default), name
    # ...and they are really taken by those names.
    c = fxpay.Client(
        client_id="id",
        client_secret="secret",
        base_url="https://fx.example",
        timeout=5.0,
        max_retries=0,
        token_store=fxpay.MemoryTokenStore(),
        ca_bundle=None,
        cassette=None,
        journal=fxpay.MemoryJournal(),
        deadline=10.0,
        client_cert=None,
        client_key=None,
        proxy="http://127.0.0.1:3128",
        rate_limit=fxpay.RateLimit(5.0),
    )
    c.close()


def test_the_other_public_callables_take_the_contracts_parameters_and_defaults() -> None:
    t = fxpay.testing
    table: list[tuple[Callable[..., Any], Spec]] = [
        (fxpay.parse_deal_created, [("body", POS, REQUIRED), ("headers", POS, None), ("nonce", KW, None)]),
        (fxpay.SqliteJournal, [("path", POS, REQUIRED)]),
        (fxpay.RedisJournal, [("url_or_client", POS, REQUIRED), ("prefix", KW, "fxpay:journal:"), ("require_persistence", KW, True)]),
        (fxpay.MemoryJournal, []),
        (fxpay.PostgresJournal, [("conninfo", POS, REQUIRED), ("table", KW, "fxpay_journal"), ("timeout", KW, 5.0)]),
        (fxpay.RateLimit, [("per_second", POS, REQUIRED), ("redis", KW, None)]),
        (t.Cassette, [("path", POS, REQUIRED), ("mode", KW, "once")]),
        (
            t.Sandbox,
            [("tls", KW, False), ("idle_timeout", KW, 60.0), ("client_auth", KW, False), ("rate_limit", KW, None)],
        ),
        (
            t.RemoteSandbox,
            [
                ("base_url", POS, REQUIRED),
                ("client_id", KW, REQUIRED),
                ("client_secret", KW, REQUIRED),
                ("admin_token", KW, REQUIRED),
                ("ca_bundle", KW, None),
            ],
        ),
        (
            t.deal_created_request,
            [("status", KW, "success"), ("process_id", KW, None), ("deal_id", KW, None), ("errors", KW, ()), ("nonce", KW, None)],
        ),
    ]
    for f, spec in table:
        assert_signature(f, spec)
    for j in (fxpay.SqliteJournal, fxpay.MemoryJournal, fxpay.RedisJournal, fxpay.PostgresJournal):
        assert_signature(j.get, [("key", POS, REQUIRED)])
        assert_signature(j.unknown, [])
        assert_signature(j.resolve, [("key", POS, REQUIRED), ("result", KW, REQUIRED)])


SANDBOX_SIGNATURES: dict[str, Spec] = {
    "approve": [("auth_url", POS, REQUIRED), ("allow", KW, True)],
    "advance": [("seconds", POS, REQUIRED)],
    "deal_status": [("deal_id", POS, REQUIRED)],
    "deals": [],
    "deliveries": [],
    "stats": [],
    "fail_next": [("path", POS, REQUIRED), ("status", POS, REQUIRED), ("times", KW, 1), ("retry_after", KW, None)],
    "drop_next": [("path", POS, REQUIRED), ("after_processing", KW, REQUIRED)],
    "delay_next": [("path", POS, REQUIRED), ("seconds", POS, REQUIRED)],
    "set_virtual_accounts": [("count", POS, REQUIRED), ("page_size", KW, None)],
    "redeliver": [("process_id", POS, REQUIRED)],
    "send_deal_created": [
        ("url", POS, REQUIRED),
        ("status", KW, "success"),
        ("process_id", KW, None),
        ("deal_id", KW, None),
        ("errors", KW, ()),
        ("nonce", KW, None),
    ],
    "reset": [],
}


@pytest.mark.parametrize("name", sorted(SANDBOX_SIGNATURES))
def test_both_sandboxes_take_the_contracts_parameters(name: str) -> None:
    for cls in (fxpay.testing.Sandbox, fxpay.testing.RemoteSandbox):
        assert_signature(getattr(cls, name), SANDBOX_SIGNATURES[name])


def test_a_remote_sandbox_has_every_method_and_property_of_the_sandbox_but_close() -> None:
    public = {n for n in dir(fxpay.testing.Sandbox) if not n.startswith("_")}
    remote = {n for n in dir(fxpay.testing.RemoteSandbox) if not n.startswith("_")}
    assert public - remote == {"close"}
    for name in ("base_url", "client_id", "client_secret", "redirect_uri", "username", "password", "ca_bundle"):
        assert name in remote, name


def test_the_receivers_refuse_a_wrong_type_naming_it() -> None:
    from conftest import need

    need("fastapi")
    need("django")
    from fxpay.contrib import django as contrib_django
    from fxpay.contrib import fastapi as contrib_fastapi

    for make in (contrib_fastapi.deal_created_router, contrib_django.deal_created_view):
        with pytest.raises(TypeError, match="nonce"):
            make(nonce=1, on_event=print)
        with pytest.raises(TypeError, match="on_event"):
            make(nonce="n", on_event=1)
        with pytest.raises(TypeError, match="journal"):
            make(journal=1, on_event=print)
        with pytest.raises(fxpay.ConfigurationError):
            make(nonce="", on_event=print)
        with pytest.raises(fxpay.ConfigurationError):
            make(on_event=print)  # neither a nonce setting nor a journal
    with pytest.raises(TypeError, match="path"):
        contrib_fastapi.deal_created_router(nonce="n", on_event=print, path=1)


def test_the_receivers_take_the_contracts_keywords() -> None:
    from conftest import need

    need("fastapi")
    need("django")
    from fxpay.contrib import django as contrib_django
    from fxpay.contrib import fastapi as contrib_fastapi

    names = {p.name for p in parameters(contrib_fastapi.deal_created_router)}
    assert {"journal", "on_event", "nonce", "nonce_for", "nonce_for_ref"} <= names
    assert_signature(contrib_django.journal, [("using", POS, "default")])


# -- conventions -------------------------------------------------------------------------------

# As the contract lists them: the client, the session and every model are compiled classes.
MODELS = ["Client", "UserSession", *MODEL_NAMES]


@pytest.mark.parametrize("name", MODELS)
def test_the_client_and_every_model_are_classes_of_the_compiled_module(name: str) -> None:
    assert getattr(fxpay._fxpay, name) is getattr(fxpay, name)
    assert getattr(fxpay, name).__module__ == "fxpay._fxpay"


def test_a_float_amount_goes_through_its_shortest_repr(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    """``1.1`` is the binary float 1.100000000000000088817841970012523...; it is sent as
    ``str(1.1)``, and the quote holds exactly ``Decimal("1.1")``."""
    for value in (1.1, 2.67, 1e2):
        q = c.get_quote(quote_id(c, value))
        assert q.buy_amount == Decimal(str(value))
        assert str(q.buy_amount) == str(Decimal(str(value)))


def test_a_32_bit_float_is_its_own_shortest_repr_or_a_type_error_naming_it(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    from conftest import need

    np = need("numpy")
    value = np.float32(2.67)
    refusal: str | None = None
    try:
        qid = quote_id(c, value)
    except TypeError as e:
        refusal = str(e)
    if refusal is None:
        assert c.get_quote(qid).buy_amount == Decimal("2.67")
    else:
        assert "buy_amount" in refusal
        assert "float32" in refusal
        assert sent(sb) == (0, 0)


@pytest.mark.parametrize(
    "amount",
    [float("nan"), float("inf"), float("-inf"), Decimal("NaN"), Decimal("sNaN"), Decimal("Infinity"), -1, "-0.01", 0, "0", 0.0, -0.0],
    ids=repr,
)
def test_nan_infinities_negatives_and_zero_are_refused_before_any_request(
    sb: fxpay.testing.Sandbox, c: fxpay.Client, amount: object
) -> None:
    with pytest.raises(fxpay.InvalidRequestError, match="buy_amount"):
        quote_id(c, amount)
    with pytest.raises(fxpay.InvalidRequestError, match="amount"):
        fxpay.DealBeneficiary(MISSING_UUID, amount, "r", "p")
    assert sent(sb) == (0, 0)


@pytest.mark.parametrize(
    "amount", ["1" * 29, "1e40", "1e-40", 10**40, Decimal("1.0000000000000000000000000001"), 1e300], ids=lambda a: repr(a)[:20]
)
def test_an_amount_a_core_decimal_cannot_hold_is_refused_never_rounded(sb: fxpay.testing.Sandbox, c: fxpay.Client, amount: object) -> None:
    with pytest.raises(fxpay.InvalidRequestError, match="buy_amount"):
        quote_id(c, amount)
    assert sent(sb) == (0, 0)


@pytest.mark.parametrize("code", ["usd", "US", "USDX", "", "ZZZ", "ÄUD", "12A"])
def test_a_currency_code_that_is_not_iso_4217_is_refused_before_any_request(sb: fxpay.testing.Sandbox, c: fxpay.Client, code: str) -> None:
    with pytest.raises(fxpay.InvalidRequestError, match="buy_currency"):
        quote_id(c, buy=code)
    with pytest.raises(fxpay.InvalidRequestError, match="sell_currency"):
        quote_id(c, sell=code)
    with pytest.raises(fxpay.InvalidRequestError, match="currency"):
        c.create_beneficiary(make_beneficiary(currency=code))
    assert sent(sb) == (0, 0)


@pytest.mark.parametrize("code", ["au", "AUS", "", "ZZ", "A1"])
def test_a_country_code_that_is_not_iso_3166_is_refused_before_any_request(sb: fxpay.testing.Sandbox, c: fxpay.Client, code: str) -> None:
    address = fxpay.Address("1 George St", "Sydney", "NSW", "2000", code)
    with pytest.raises(fxpay.InvalidRequestError, match="country"):
        c.create_beneficiary(make_beneficiary(address=address))
    bank = make_beneficiary().bank_details.replace(bank_address=address)
    with pytest.raises(fxpay.InvalidRequestError, match="country"):
        c.create_beneficiary(make_beneficiary(bank_details=bank))
    assert sent(sb) == (0, 0)


def read_models(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> list[Any]:
    """A model of each kind: a quote (and its freebies), a deal, a spot deal, a token, a deal
    line, a virtual account, an authorization request, a DealCreated and its FieldError."""
    qid = quote_id(c)
    line = deal_line(c, qid)
    deal = c.create_deal(quote_id=qid, funding_source=FUNDING, beneficiaries=[line])
    qid2 = quote_id(c)
    spot = c.create_spot_deal(
        quote_id=qid2, funding_source=FUNDING, beneficiaries=[deal_line(c, qid2)], callback_url="http://127.0.0.1:9/cb"
    )
    q = c.get_quote(qid)
    auth, callback = login(sb, c)
    token = c.exchange_code(auth, callback)
    account = c.user_session(token).list_virtual_accounts()[0]
    event = fxpay.parse_deal_created(fxpay.testing.deal_created_request(status="fail")[0])
    return [q, q.freebies, deal, spot, token, line, account, auth, event, event.errors[0]]


def test_every_model_is_immutable_compares_by_value_pickles_and_has_to_dict(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    models = [*read_models(sb, c), make_beneficiary()]
    for m in [*models, make_beneficiary().bank_details, make_beneficiary().address]:
        name = type(m).__name__
        copy = pickle.loads(pickle.dumps(m))
        assert copy == m, name
        assert copy is not m, name
        field = "raw" if name == "VirtualAccount" else next(iter(inspect.signature(type(m)).parameters))
        with pytest.raises(AttributeError):
            setattr(m, field, getattr(m, field))
        assert repr(m).startswith(f"{name}("), name
        d = m.to_dict()
        assert isinstance(d, dict)
        if name not in ("Token", "AuthorizationRequest"):  # these two are OAuth's (RFC 6749 names)
            assert all("_" not in k for k in d), (name, d)


def test_models_read_from_the_service_keep_the_full_json_in_raw_and_amounts_as_decimal(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    q, _, deal, spot, *_ = read_models(sb, c)
    # The sandbox's quote carries fields the model has no attribute for; raw keeps them.
    assert {"createdAt", "beneficiaries"} <= set(q.raw) - set(q.to_dict())
    assert q.raw["id"] == q.id
    assert q.raw["buyAmount"] == q.buy_amount
    for key in ("buyAmount", "sellAmount", "customerRate", "inverseCustomerRate", "fee"):
        assert isinstance(q.to_dict()[key], Decimal), key
    for attr in ("buy_amount", "sell_amount", "customer_rate", "inverse_customer_rate", "fee"):
        assert isinstance(getattr(q, attr), Decimal), attr
    assert {"total", "claimed", "remaining"} <= set(dir(q.freebies))
    assert q.fee_currency is None or len(q.fee_currency) == 3
    assert deal.raw["dealId"] == deal.deal_id
    assert deal.quote_id
    assert deal.funding_source == FUNDING
    assert deal.channel is None
    assert [b.beneficiary_id for b in deal.beneficiaries]
    assert isinstance(spot.raw, dict)
    assert spot.process_id


def test_no_secret_appears_in_any_repr_str_or_error_message(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    _, _, _, spot, token, _, _, auth, _, _ = read_models(sb, c)
    assert token.refresh_token is not None
    assert auth.code_verifier is not None
    assert spot.callback_nonce is not None
    for secret, holder in [
        (token.access_token, token),
        (token.refresh_token, token),
        (auth.code_verifier, auth),
        (spot.callback_nonce, spot),
        (sb.client_secret, c),
    ]:
        assert secret not in repr(holder), type(holder).__name__
        assert secret not in str(holder), type(holder).__name__
    wrong = fxpay.Client(sb.client_id, "a-wrong-secret-value", base_url=sb.base_url)
    with pytest.raises(fxpay.OAuthError) as e:
        wrong.get_quote(MISSING_UUID)
    assert "a-wrong-secret-value" not in str(e.value)
    assert "a-wrong-secret-value" not in repr(e.value)
    with pytest.raises(fxpay.OAuthError) as e2:
        c.refresh_token(token.refresh_token + "x")
    assert token.refresh_token not in str(e2.value)


# -- wrong types and wrong values, on every public call -----------------------------------------

Call = Callable[[fxpay.testing.Sandbox, fxpay.Client], object]
TOKEN = fxpay.Token("access", "Bearer", 3599, dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc), "refresh", "gca-aisp")
LINE = fxpay.DealBeneficiary(MISSING_UUID, "10", "r", "p")


def _journaled(sb: fxpay.testing.Sandbox) -> fxpay.Client:
    return sb.client(journal=fxpay.MemoryJournal())


def _auth(c: fxpay.Client) -> fxpay.AuthorizationRequest:
    return c.authorization_url("https://app.example.test/callback")


WRONG_TYPES: list[tuple[str, Call, str]] = [
    ("Client.client_id", lambda sb, c: fxpay.Client(1, "s", base_url=sb.base_url), "client_id"),
    ("Client.base_url", lambda sb, c: fxpay.Client("i", "s", base_url=b"http://127.0.0.1"), "base_url"),
    ("Client.timeout", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, timeout="1"), "timeout"),
    ("Client.max_retries", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, max_retries=1.5), "max_retries"),
    ("Client.token_store", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, token_store=1), "token_store"),
    ("Client.journal", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, journal="j"), "journal"),
    ("Client.cassette", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, cassette=1), "cassette"),
    ("Client.proxy", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, proxy=1), "proxy"),
    ("Client.rate_limit", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, rate_limit=5), "rate_limit"),
    ("with_options.deadline", lambda sb, c: c.with_options(deadline="1"), "deadline"),
    ("create_quote.buy_amount", lambda sb, c: quote_id(c, None), "buy_amount"),
    ("create_quote.buy_amount bool", lambda sb, c: quote_id(c, True), "buy_amount"),
    ("create_quote.buy_amount bytes", lambda sb, c: quote_id(c, b"1"), "buy_amount"),
    ("create_quote.buy_currency", lambda sb, c: quote_id(c, buy=1), "buy_currency"),  # type: ignore[arg-type]
    (
        "create_quote.beneficiaries",
        lambda sb, c: c.create_quote(buy_currency="AUD", buy_amount="1", sell_currency="USD", beneficiaries="1"),
        "beneficiaries",
    ),
    (
        "create_quote.idempotency_key",
        lambda sb, c: c.create_quote(buy_currency="AUD", buy_amount="1", sell_currency="USD", idempotency_key=1),
        "idempotency_key",
    ),
    ("get_quote", lambda sb, c: c.get_quote(1), "quote_id"),
    ("get_quote_async", lambda sb, c: c.get_quote_async(None), "quote_id"),
    ("create_beneficiary", lambda sb, c: c.create_beneficiary({"currency": "AUD"}), "beneficiary"),
    ("create_deal.quote_id", lambda sb, c: c.create_deal(quote_id=1, funding_source=FUNDING, beneficiaries=[LINE]), "quote_id"),
    (
        "create_deal.funding_source",
        lambda sb, c: c.create_deal(quote_id=MISSING_UUID, funding_source=1, beneficiaries=[LINE]),
        "funding_source",
    ),
    (
        "create_deal.beneficiaries",
        lambda sb, c: c.create_deal(quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=LINE),
        "beneficiaries",
    ),
    (
        "create_deal.beneficiaries[0]",
        lambda sb, c: c.create_deal(quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=[1]),
        "beneficiaries",
    ),
    (
        "create_deal.channel",
        lambda sb, c: c.create_deal(quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=[LINE], channel=1),
        "channel",
    ),
    (
        "create_spot_deal.callback_url",
        lambda sb, c: c.create_spot_deal(quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=[LINE], callback_url=1),
        "callback_url",
    ),
    (
        "create_spot_deal.callback_nonce",
        lambda sb, c: c.create_spot_deal(
            quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=[LINE], callback_url="http://127.0.0.1:9/cb", callback_nonce=1
        ),
        "callback_nonce",
    ),
    ("authorization_url.redirect_uri", lambda sb, c: c.authorization_url(None), "redirect_uri"),
    ("authorization_url.state", lambda sb, c: c.authorization_url(sb.redirect_uri, state=1), "state"),
    ("authorization_url.pkce", lambda sb, c: c.authorization_url(sb.redirect_uri, pkce="yes"), "pkce"),
    ("exchange_code.auth", lambda sb, c: c.exchange_code("auth", "?code=x"), "auth"),
    ("exchange_code.callback", lambda sb, c: c.exchange_code(_auth(c), b"?code=x"), "callback"),
    ("refresh_token", lambda sb, c: c.refresh_token(None), "refresh_token"),
    ("user_session.token", lambda sb, c: c.user_session(TOKEN.to_dict()), "token"),
    ("user_session.on_token", lambda sb, c: c.user_session(TOKEN, on_token="print"), "on_token"),
    ("pay_out.rows", lambda sb, c: _journaled(sb).pay_out(1, funding_source=FUNDING), "rows"),
    ("pay_out.concurrency", lambda sb, c: _journaled(sb).pay_out([], funding_source=FUNDING, concurrency="8"), "concurrency"),
    ("pay_out.progress", lambda sb, c: _journaled(sb).pay_out([], funding_source=FUNDING, progress=1), "progress"),
    ("pay_out_iter.funding_source", lambda sb, c: list(_journaled(sb).pay_out_iter([], funding_source=1)), "funding_source"),
    ("pay_out_iter.max_rate", lambda sb, c: list(_journaled(sb).pay_out_iter([], funding_source=FUNDING, max_rate="1")), "max_rate"),
    ("parse_deal_created.body", lambda sb, c: fxpay.parse_deal_created(1), "body"),
    ("parse_deal_created.nonce", lambda sb, c: fxpay.parse_deal_created(b"{}", {}, nonce=1), "nonce"),
    ("parse_deal_created.headers", lambda sb, c: fxpay.parse_deal_created(fxpay.testing.deal_created_request()[0], 1), "headers"),
    (
        "parse_deal_created.headers (a list)",
        lambda sb, c: fxpay.parse_deal_created(fxpay.testing.deal_created_request()[0], [("callback-nonce", "n")]),
        "headers",
    ),
    ("Token.from_dict", lambda sb, c: fxpay.Token.from_dict([("access_token", "a")]), "d"),
    ("DealBeneficiary.amount", lambda sb, c: fxpay.DealBeneficiary(MISSING_UUID, None, "r", "p"), "amount"),
    ("Address.country", lambda sb, c: fxpay.Address("a", "b", "c", "d", 36), "country"),
    ("Beneficiary.bank_details", lambda sb, c: make_beneficiary(bank_details={}), "bank_details"),
    ("SqliteJournal.path", lambda sb, c: fxpay.SqliteJournal(3), "path"),
    ("MemoryJournal.get", lambda sb, c: fxpay.MemoryJournal().get(1), "key"),
    ("MemoryJournal.resolve", lambda sb, c: fxpay.MemoryJournal().resolve("k", result=1), "result"),
    ("RateLimit.per_second", lambda sb, c: fxpay.RateLimit("5"), "per_second"),
    ("Cassette.mode", lambda sb, c: fxpay.testing.Cassette("x.json", mode=1), "mode"),
    ("Sandbox.advance", lambda sb, c: sb.advance("1"), "seconds"),
    ("Sandbox.fail_next", lambda sb, c: sb.fail_next(1, 500), "path"),
    ("deal_created_request.errors", lambda sb, c: fxpay.testing.deal_created_request(errors=[1]), "errors"),
]


@pytest.mark.parametrize(("call", "param"), [(f, p) for _, f, p in WRONG_TYPES], ids=[n for n, _, _ in WRONG_TYPES])
def test_a_wrong_type_is_a_type_error_naming_the_parameter(sb: fxpay.testing.Sandbox, c: fxpay.Client, call: Call, param: str) -> None:
    with pytest.raises(TypeError) as e:
        call(sb, c)  # an _async twin refuses at the call, before any coroutine exists
    assert not isinstance(e.value, fxpay.FxPayError)
    assert param in str(e.value)
    assert sent(sb) == (0, 0)


def _journal_file(kind: str) -> Callable[[Path], object]:
    def make(tmp: Path) -> object:
        path = tmp / "j.db"
        if kind == "empty":
            path.write_bytes(b"")
        else:
            path.write_text("not a journal")
        return fxpay.SqliteJournal(path).get("k")

    return make


WRONG_VALUES: list[tuple[str, Call, type[BaseException]]] = [
    ("Client.base_url http", lambda sb, c: fxpay.Client("i", "s", base_url="http://fx.example"), fxpay.ConfigurationError),
    ("Client.base_url /v1", lambda sb, c: fxpay.Client("i", "s", base_url="https://fx.example/v1"), fxpay.ConfigurationError),
    ("Client.base_url empty", lambda sb, c: fxpay.Client("i", "s", base_url=""), fxpay.ConfigurationError),
    ("Client.client_id empty", lambda sb, c: fxpay.Client("", "s", base_url=sb.base_url), fxpay.ConfigurationError),
    ("Client.timeout nan", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, timeout=float("nan")), fxpay.ConfigurationError),
    ("Client.max_retries -1", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, max_retries=-1), fxpay.ConfigurationError),
    ("Client.ca_bundle a directory", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, ca_bundle="/"), fxpay.ConfigurationError),
    (
        "Client.ca_bundle a device",
        lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, ca_bundle=os.devnull),
        fxpay.ConfigurationError,
    ),
    (
        "Client.client_cert missing",
        lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, client_cert="/nonexistent/cert.pem"),
        fxpay.ConfigurationError,
    ),
    ("Client.proxy ftp", lambda sb, c: fxpay.Client("i", "s", base_url=sb.base_url, proxy="ftp://127.0.0.1:21"), fxpay.ConfigurationError),
    ("with_options.timeout -1", lambda sb, c: c.with_options(timeout=-1), fxpay.ConfigurationError),
    ("with_options.deadline inf", lambda sb, c: c.with_options(deadline=float("inf")), fxpay.ConfigurationError),
    (
        "create_quote.beneficiaries 0",
        lambda sb, c: c.create_quote(buy_currency="AUD", buy_amount="1", sell_currency="USD", beneficiaries=0),
        fxpay.InvalidRequestError,
    ),
    ("create_quote.buy_amount empty", lambda sb, c: quote_id(c, ""), fxpay.InvalidRequestError),
    ("create_quote.buy_amount 1_000", lambda sb, c: quote_id(c, "1_000"), fxpay.InvalidRequestError),
    ("create_quote.buy_amount surrogate", lambda sb, c: quote_id(c, "1\ud800"), fxpay.InvalidRequestError),
    (
        "create_quote.idempotency_key empty",
        lambda sb, c: c.create_quote(buy_currency="AUD", buy_amount="1", sell_currency="USD", idempotency_key=""),
        fxpay.ConfigurationError,
    ),
    ("get_quote empty", lambda sb, c: c.get_quote(""), fxpay.InvalidRequestError),
    ("get_quote a path", lambda sb, c: c.get_quote("../deals"), fxpay.InvalidRequestError),
    ("get_quote surrogate", lambda sb, c: c.get_quote("\udc80"), fxpay.InvalidRequestError),
    ("create_beneficiary empty name", lambda sb, c: c.create_beneficiary(make_beneficiary(name="")), fxpay.InvalidRequestError),
    (
        "create_deal no beneficiary",
        lambda sb, c: c.create_deal(quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=[]),
        fxpay.InvalidRequestError,
    ),
    (
        "create_deal empty funding",
        lambda sb, c: c.create_deal(quote_id=MISSING_UUID, funding_source="", beneficiaries=[LINE]),
        fxpay.InvalidRequestError,
    ),
    (
        "create_spot_deal ftp callback",
        lambda sb, c: c.create_spot_deal(
            quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=[LINE], callback_url="ftp://127.0.0.1/cb"
        ),
        fxpay.InvalidRequestError,
    ),
    (
        "create_spot_deal nonce without url",
        lambda sb, c: c.create_spot_deal(quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=[LINE], callback_nonce="n"),
        fxpay.InvalidRequestError,
    ),
    (
        "create_spot_deal empty nonce",
        lambda sb, c: c.create_spot_deal(
            quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=[LINE], callback_url="http://127.0.0.1:9/cb", callback_nonce=""
        ),
        fxpay.InvalidRequestError,
    ),
    ("authorization_url http", lambda sb, c: c.authorization_url("http://app.example/cb"), fxpay.ConfigurationError),
    ("authorization_url empty state", lambda sb, c: c.authorization_url(sb.redirect_uri, state=""), fxpay.InvalidRequestError),
    ("authorization_url empty scope", lambda sb, c: c.authorization_url(sb.redirect_uri, scope=""), fxpay.InvalidRequestError),
    ("exchange_code another state", lambda sb, c: c.exchange_code(_auth(c), "?code=abc&state=other"), fxpay.StateMismatchError),
    ("exchange_code error=", lambda sb, c: c.exchange_code(a := _auth(c), f"?error=access_denied&state={a.state}"), fxpay.OAuthError),
    ("refresh_token empty", lambda sb, c: c.refresh_token(""), fxpay.InvalidRequestError),
    ("Token.from_dict empty", lambda sb, c: fxpay.Token.from_dict({}), fxpay.InvalidRequestError),
    ("pay_out concurrency 0", lambda sb, c: _journaled(sb).pay_out([], funding_source=FUNDING, concurrency=0), fxpay.InvalidRequestError),
    (
        "pay_out max_rate nan",
        lambda sb, c: _journaled(sb).pay_out([], funding_source=FUNDING, max_rate=float("nan")),
        fxpay.ConfigurationError,
    ),
    ("pay_out without a journal", lambda sb, c: c.pay_out([], funding_source=FUNDING), fxpay.ConfigurationError),
    ("parse_deal_created empty nonce", lambda sb, c: fxpay.parse_deal_created(b"{}", {}, nonce=""), fxpay.WebhookVerificationError),
    ("parse_deal_created not json", lambda sb, c: fxpay.parse_deal_created(b"{"), fxpay.WebhookPayloadError),
    ("parse_deal_created surrogate", lambda sb, c: fxpay.parse_deal_created("\ud800"), fxpay.WebhookPayloadError),
    ("MemoryJournal.resolve no such key", lambda sb, c: fxpay.MemoryJournal().resolve("nope", result=None), fxpay.InvalidRequestError),
    ("SqliteJournal empty path", lambda sb, c: fxpay.SqliteJournal(""), fxpay.ConfigurationError),
    ("SqliteJournal path with a surrogate", lambda sb, c: fxpay.SqliteJournal("journal-\udcff.db"), fxpay.ConfigurationError),
    ("SqliteJournal path with a NUL", lambda sb, c: fxpay.SqliteJournal("journal\0.db"), fxpay.ConfigurationError),
    ("Cassette path with a surrogate", lambda sb, c: fxpay.testing.Cassette("\ud800.json"), fxpay.ConfigurationError),
    ("Cassette path with a NUL", lambda sb, c: fxpay.testing.Cassette("a\0.json", mode="record"), fxpay.ConfigurationError),
    (
        "pay_out max_rate a huge negative int",
        lambda sb, c: _journaled(sb).pay_out([], funding_source=FUNDING, max_rate=-(10**400)),
        fxpay.ConfigurationError,
    ),
    (
        "pay_out max_rate a huge int",
        lambda sb, c: _journaled(sb).pay_out([], funding_source=FUNDING, max_rate=10**400),
        fxpay.ConfigurationError,
    ),
    (
        "deal_created_request process_id surrogate",
        lambda sb, c: fxpay.testing.deal_created_request(process_id="\ud800"),
        fxpay.InvalidRequestError,
    ),
    (
        "send_deal_created error message surrogate",
        lambda sb, c: sb.send_deal_created("http://127.0.0.1:9/cb", status="fail", errors=[{"errorCode": "a:b:1", "message": "\udc80"}]),
        fxpay.InvalidRequestError,
    ),
    (
        "PostgresJournal timeout a huge int",
        lambda sb, c: fxpay.PostgresJournal("host=127.0.0.1", timeout=10**400),
        fxpay.ConfigurationError,
    ),
    ("PostgresJournal timeout nan", lambda sb, c: fxpay.PostgresJournal("host=127.0.0.1", timeout=float("nan")), fxpay.ConfigurationError),
    ("SqliteJournal timeout a huge int", lambda sb, c: fxpay.SqliteJournal("j.db", timeout=10**400), fxpay.ConfigurationError),
    ("RateLimit 0", lambda sb, c: fxpay.RateLimit(0), fxpay.ConfigurationError),
    ("RateLimit nan", lambda sb, c: fxpay.RateLimit(float("nan")), fxpay.ConfigurationError),
    ("Cassette mode", lambda sb, c: fxpay.testing.Cassette("x.json", mode="rewind"), fxpay.InvalidRequestError),
    ("Sandbox.advance -1", lambda sb, c: sb.advance(-1), fxpay.InvalidRequestError),
    ("Sandbox.advance nan", lambda sb, c: sb.advance(float("nan")), fxpay.InvalidRequestError),
    ("Sandbox.fail_next status 99", lambda sb, c: sb.fail_next("/v1/payments/quotes", 99), fxpay.InvalidRequestError),
    ("Sandbox.deal_status unknown", lambda sb, c: sb.deal_status("nope"), fxpay.InvalidRequestError),
    ("Sandbox.set_virtual_accounts -1", lambda sb, c: sb.set_virtual_accounts(-1), fxpay.InvalidRequestError),
    ("Sandbox.redeliver unknown", lambda sb, c: sb.redeliver(MISSING_UUID), fxpay.InvalidRequestError),
    ("Sandbox.send_deal_created elsewhere", lambda sb, c: sb.send_deal_created("http://192.0.2.1/cb"), fxpay.InvalidRequestError),
    ("deal_created_request status", lambda sb, c: fxpay.testing.deal_created_request(status="ok"), fxpay.InvalidRequestError),
]


@pytest.mark.parametrize(("call", "error"), [(f, e) for _, f, e in WRONG_VALUES], ids=[n for n, _, _ in WRONG_VALUES])
def test_a_wrong_value_is_an_fxpay_error_and_sends_nothing(
    sb: fxpay.testing.Sandbox, c: fxpay.Client, call: Call, error: type[BaseException], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path wrongly taken makes its file here
    with pytest.raises(fxpay.FxPayError) as e:
        call(sb, c)
    assert isinstance(e.value, error), repr(e.value)
    assert sent(sb) == (0, 0)


@pytest.mark.parametrize("kind", ["empty", "text"])
def test_an_existing_file_that_is_not_a_journal_is_a_journal_error(tmp_path: Path, kind: str) -> None:
    with pytest.raises(fxpay.JournalError, match=r"empty|not an SQLite"):
        _journal_file(kind)(tmp_path)


# -- Client ------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://127.0.0.1:1", "http://127.9.8.7:1", "http://localhost:1", "http://[::1]:1", "https://fx.example"])
def test_base_url_may_be_http_only_on_loopback(url: str) -> None:
    with fxpay.Client("i", "s", base_url=url) as c:
        assert c.base_url.rstrip("/") == url


@pytest.mark.parametrize("url", ["http://10.0.0.1", "http://128.0.0.1", "http://localhost.example.com", "ftp://127.0.0.1"])
def test_base_url_elsewhere_must_be_https(url: str) -> None:
    with pytest.raises(fxpay.ConfigurationError):
        fxpay.Client("i", "s", base_url=url)


def test_from_env_reads_the_three_variables_and_the_ca_bundle(
    sb: fxpay.testing.Sandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("FXPAY_CA_BUNDLE", "FXPAY_CLIENT_CERT", "FXPAY_CLIENT_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FXPAY_CLIENT_ID", sb.client_id)
    monkeypatch.setenv("FXPAY_CLIENT_SECRET", sb.client_secret)
    monkeypatch.setenv("FXPAY_BASE_URL", sb.base_url)
    with fxpay.Client.from_env() as c:
        assert c.get_quote(quote_id(c)).buy_amount == Decimal("100")
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    monkeypatch.setenv("FXPAY_CA_BUNDLE", str(fifo))
    with pytest.raises(fxpay.ConfigurationError, match="FIFO"):
        fxpay.Client.from_env()
    monkeypatch.delenv("FXPAY_CA_BUNDLE")
    monkeypatch.setenv("FXPAY_CLIENT_CERT", str(tmp_path / "missing.pem"))
    with pytest.raises(fxpay.ConfigurationError, match="client_cert"):
        fxpay.Client.from_env()
    monkeypatch.delenv("FXPAY_BASE_URL")
    with pytest.raises(fxpay.ConfigurationError, match="FXPAY_BASE_URL"):
        fxpay.Client.from_env()


def test_from_env_reads_the_lines_a_served_sandbox_prints_for_tls_and_client_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    """FXPAY_CA_BUNDLE, FXPAY_CLIENT_CERT and FXPAY_CLIENT_KEY are read; without the client
    identity, the call fails with a TransportError saying a client certificate was asked for."""
    with fxpay.testing.Sandbox(tls=True, client_auth=True) as sb:
        assert sb.base_url.startswith("https://127.0.0.1:")
        assert sb.ca_bundle is not None
        assert sb.client_cert is not None
        assert sb.client_key is not None
        env = {
            "FXPAY_CLIENT_ID": sb.client_id,
            "FXPAY_CLIENT_SECRET": sb.client_secret,
            "FXPAY_BASE_URL": sb.base_url,
            "FXPAY_CA_BUNDLE": str(sb.ca_bundle),
            "FXPAY_CLIENT_CERT": str(sb.client_cert),
            "FXPAY_CLIENT_KEY": str(sb.client_key),
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        with fxpay.Client.from_env() as c:
            assert isinstance(quote_id(c), str)
        with sb.client() as c:  # sb.client() uses the sandbox's CA and client identity
            assert isinstance(quote_id(c), str)
        monkeypatch.delenv("FXPAY_CLIENT_CERT")
        monkeypatch.delenv("FXPAY_CLIENT_KEY")
        with fxpay.Client.from_env(max_retries=0) as c, pytest.raises(fxpay.TransportError, match="client certificate"):
            quote_id(c)


def test_sync_and_async_context_managers_close_the_client(sb: fxpay.testing.Sandbox) -> None:
    with sb.client() as c:
        pass
    assert c.closed
    with pytest.raises(fxpay.FxPayError):
        c.get_quote(MISSING_UUID)

    async def run() -> fxpay.Client:
        async with sb.client() as ac:
            await ac.get_quote_async(await ac.create_quote_async(buy_currency="AUD", buy_amount="5", sell_currency="USD"))
        return ac

    assert asyncio.run(run()).closed
    other = sb.client()
    other.close()
    other.close()
    third = sb.client()
    asyncio.run(third.aclose())
    assert other.closed
    assert third.closed


def test_concurrent_first_calls_make_one_token_request_and_later_calls_reuse_it(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    qid = quote_id(fxpay.testing.Sandbox.client(sb))  # another client: its own token
    before = sb.stats()["token_requests"]
    quotes = all_at_once(8, lambda: c.get_quote(qid))
    assert {q.id for q in quotes} == {qid}
    c.get_quote(qid)
    assert sb.stats()["token_requests"] - before == 1


def test_a_401_renews_the_token_once_and_replays_the_call_once(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    qid = quote_id(c)
    sb.fail_next("/v1/payments/quotes/" + qid, 401)
    assert c.get_quote(qid).id == qid
    assert sb.stats()["token_requests"] == 2
    sb.fail_next("/v1/payments/quotes/" + qid, 401, times=2)
    with pytest.raises(fxpay.AuthenticationError):
        c.get_quote(qid)
    assert sb.stats()["token_requests"] == 3


# -- responses and per-call options ------------------------------------------------------------


def test_with_options_shares_the_token_and_closing_the_derived_client_closes_nothing(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    qid = quote_id(c)
    d = c.with_options(timeout=5.0, max_retries=0, deadline=10.0)
    assert isinstance(d, fxpay.Client)
    assert d is not c
    assert d.get_quote(qid).id == qid
    assert sb.stats()["token_requests"] == 1  # c's token, shared
    d.close()
    assert c.get_quote(qid).id == qid
    e = c.with_options()
    c.close()
    with pytest.raises(fxpay.FxPayError):
        e.get_quote(qid)


def test_with_options_left_none_are_the_clients_own(sb: fxpay.testing.Sandbox) -> None:
    """A derived client keeps every option it was not given: ``c``'s ``max_retries=0`` (a
    503 is raised, not retried) and ``c``'s deadline (a 3 s delay is cut at 0.5 s)."""
    with sb.client(max_retries=0, deadline=0.5) as c:
        qid = quote_id(c)
        d = c.with_options(timeout=20.0)
        sb.fail_next("/v1/payments/quotes/" + qid, 503)
        with pytest.raises(fxpay.ServerError):
            d.get_quote(qid)
        sb.delay_next("/v1/payments/quotes/" + qid, 3.0)
        with pytest.raises(fxpay.TimeoutError):
            d.get_quote(qid)
        # c itself is unchanged by a derived client's options.
        sb.fail_next("/v1/payments/quotes/" + qid, 503)
        c.with_options(max_retries=2)
        with pytest.raises(fxpay.ServerError):
            c.get_quote(qid)


def test_a_retry_after_past_the_deadline_raises_that_answer_at_once(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    qid = quote_id(c)
    sb.fail_next("/v1/payments/quotes/" + qid, 429, retry_after=30)
    with pytest.raises(fxpay.RateLimitError) as e:
        c.with_options(deadline=5.0).get_quote(qid)
    assert e.value.retry_after == 30
    assert sb.stats()["paths"]["GET /v1/payments/quotes/{id}"] == 1  # the one refused attempt


def test_the_raw_response_of_every_network_method(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    raw = c.with_raw_response
    for name in ["create_quote", "get_quote", "create_beneficiary", "create_deal", "create_spot_deal", "exchange_code", "refresh_token"]:
        assert callable(getattr(raw, name)), name
        assert callable(getattr(raw, name + "_async")), name
    r = raw.create_quote(buy_currency="AUD", buy_amount="100", sell_currency="USD")
    qid = r.parse()
    r = raw.get_quote(qid)
    assert isinstance(r.status, int)
    assert r.status == 200
    assert isinstance(r.request_id, str)
    assert r.headers["X-Request-ID"] == r.headers["x-request-id"] == r.request_id
    assert isinstance(r.headers, Mapping)
    assert isinstance(r.elapsed, dt.timedelta)
    assert r.attempts == 1
    assert r.parse() == r.parse() == c.get_quote(qid)
    for attr in ("status", "headers", "request_id", "elapsed", "attempts", "anything"):
        with pytest.raises(AttributeError):
            setattr(r, attr, None)
    ra = asyncio.run(raw.get_quote_async(qid))
    assert ra.parse() == r.parse()
    assert ra.status == 200
    auth, callback = login(sb, c)
    s = c.user_session(c.exchange_code(auth, callback))
    rs = s.with_raw_response.list_virtual_accounts()
    assert rs.status == 200
    assert rs.parse() == s.list_virtual_accounts()
    assert asyncio.run(s.with_raw_response.list_virtual_accounts_async()).status == 200


def test_api_and_oauth_errors_carry_the_request_id_and_read_only_headers(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    with pytest.raises(fxpay.NotFoundError) as e:
        c.get_quote(MISSING_UUID)
    err = e.value
    assert err.status == 404
    assert isinstance(err.request_id, str)
    assert err.headers["X-REQUEST-ID"] == err.request_id
    assert err.request_id in str(err)
    assert err.errors
    assert isinstance(err.errors[0], fxpay.FieldError)
    assert err.body
    with pytest.raises((TypeError, AttributeError)):
        err.headers["x-request-id"] = "x"  # type: ignore[index]
    with pytest.raises(fxpay.NotFoundError) as ea:  # the twin: the same exception, its own request id
        asyncio.run(c.get_quote_async(MISSING_UUID))
    assert ea.value.status == 404
    assert ea.value.request_id not in (None, err.request_id)
    with pytest.raises(fxpay.OAuthError) as o:
        c.refresh_token("not-a-refresh-token")
    assert o.value.error == "invalid_grant"
    assert isinstance(o.value.error_description, str)
    assert o.value.request_id
    assert o.value.headers["x-request-id"] == o.value.request_id


def test_an_unknown_outcome_keeps_the_request_id_and_the_answer_as_its_cause(sb: fxpay.testing.Sandbox) -> None:
    with sb.client(journal=fxpay.MemoryJournal(), max_retries=0) as c:
        sb.fail_next("/v1/payments/quotes", 503)
        with pytest.raises(fxpay.OutcomeUnknownError) as e:
            c.create_quote(buy_currency="AUD", buy_amount="1", sell_currency="USD", idempotency_key="k")
    assert isinstance(e.value.__cause__, fxpay.ServerError)
    assert e.value.request_id == e.value.__cause__.request_id is not None
    assert e.value.entry.state == "unknown"
    assert e.value.entry.key == "k"


# -- payments ----------------------------------------------------------------------------------


def test_a_quote_deal_and_spot_deal_with_the_contracts_fields(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    qid = c.create_quote(buy_currency="AUD", buy_amount=Decimal("250.50"), sell_currency="USD", beneficiaries=1)
    assert isinstance(qid, str)
    q = c.get_quote(quote_id=qid)
    assert (q.id, q.buy_currency, q.buy_amount, q.sell_currency) == (qid, "AUD", Decimal("250.50"), "USD")
    assert str(q.buy_amount) == "250.50"  # exactly as the JSON number was written, trailing zero kept
    assert q.sell_amount > 0
    assert q.customer_rate > 0
    assert q.inverse_customer_rate > 0
    assert q.freebies is not None
    assert q.freebies.total == q.freebies.claimed + q.freebies.remaining
    line = deal_line(c, qid)
    assert isinstance(line.beneficiary_id, str)
    deal = c.create_deal(quote_id=qid, funding_source=FUNDING, beneficiaries=(line,), channel=None)
    assert isinstance(deal, fxpay.Deal)
    assert (deal.quote_id, deal.funding_source, list(deal.beneficiaries)) == (qid, FUNDING, [line])
    assert sb.deal_status(deal.deal_id) == "Booked"
    sb.advance(86400)
    assert sb.deal_status(deal.deal_id) == "Paid"
    assert [d for d in sb.deals() if deal.deal_id in str(d)]


def test_a_spot_deal_without_a_nonce_gets_a_generated_one_sent_with_its_callback(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    qid = quote_id(c)
    url = "http://127.0.0.1:9/fxpay/deal-created"
    spot = c.create_spot_deal(quote_id=qid, funding_source=FUNDING, beneficiaries=[deal_line(c, qid)], callback_url=url)
    assert isinstance(spot, fxpay.SpotDeal)
    assert spot.callback_url == url
    nonce = spot.callback_nonce
    assert nonce is not None
    assert len(nonce) * 6 >= 128 + 6
    other = c.create_spot_deal(quote_id=quote_id(c), funding_source=FUNDING, beneficiaries=[deal_line(c, qid)], callback_url=url)
    assert other.callback_nonce != nonce
    # The service answers the callback-location with the callback-nonce it was given.
    delivery = sb.redeliver(spot.process_id)
    assert (delivery["url"], delivery["nonce"]) == (url, nonce)
    given = c.create_spot_deal(
        quote_id=quote_id(c), funding_source=FUNDING, beneficiaries=[deal_line(c, qid)], callback_url=url, callback_nonce="my-nonce"
    )
    assert given.callback_nonce == "my-nonce"
    assert sb.redeliver(given.process_id)["nonce"] == "my-nonce"


@pytest.mark.parametrize("fault", ["503", "drop after", "timeout"])
def test_a_failed_deal_creation_is_never_sent_twice(sb: fxpay.testing.Sandbox, fault: str) -> None:
    with sb.client(max_retries=2, timeout=1.0) as c:
        qid = quote_id(c)
        line = deal_line(c, qid)
        if fault == "503":
            sb.fail_next("/v1/payments/deals", 503)  # a retry would be answered and booked
        elif fault == "drop after":
            sb.drop_next("/v1/payments/deals", after_processing=True)
        else:
            sb.delay_next("/v1/payments/deals", 3.0)
        with pytest.raises((fxpay.ServerError, fxpay.TransportError)):
            c.create_deal(quote_id=qid, funding_source=FUNDING, beneficiaries=[line])
    assert sb.stats()["paths"]["POST /v1/payments/deals"] == 1


def test_a_401_on_a_deal_is_the_one_replay(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    qid = quote_id(c)
    line = deal_line(c, qid)
    sb.fail_next("/v1/payments/deals", 401)
    deal = c.create_deal(quote_id=qid, funding_source=FUNDING, beneficiaries=[line])
    assert deal.quote_id == qid
    assert sb.stats()["paths"]["POST /v1/payments/deals"] == 2
    assert len(sb.deals()) == 1


# -- account information -----------------------------------------------------------------------


def test_authorization_url_defaults_pkce_s256_and_a_random_state(c: fxpay.Client) -> None:
    auth = c.authorization_url("https://app.example.test/callback")
    assert isinstance(auth, fxpay.AuthorizationRequest)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(auth.url).query)
    assert query["scope"] == ["gca-aisp"]
    assert query["state"] == [auth.state]
    assert query["redirect_uri"] == [auth.redirect_uri] == ["https://app.example.test/callback"]
    assert query["code_challenge_method"] == ["S256"]
    assert auth.code_verifier is not None
    challenge = base64.urlsafe_b64encode(hashlib.sha256(auth.code_verifier.encode()).digest()).rstrip(b"=").decode()
    assert query["code_challenge"] == [challenge]
    assert len(auth.state) * 6 >= 128 + 6
    assert auth.state != c.authorization_url("https://app.example.test/callback").state
    assert auth.to_dict()["code_verifier"] == auth.code_verifier
    assert auth.code_verifier not in repr(auth)
    plain = c.authorization_url("com.example.app:/oauth", state="s1", scope="gca-aisp", pkce=False)
    assert plain.state == "s1"
    assert plain.code_verifier is None
    assert "code_challenge" not in plain.url


def test_exchange_refresh_and_a_session_that_pages_to_the_end(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    auth, callback = login(sb, c)
    token = c.exchange_code(auth, urllib.parse.urlsplit(callback).query)  # the query string alone
    assert isinstance(token, fxpay.Token)
    assert (token.token_type, token.expires_in, token.scope) == ("Bearer", 3599, "gca-aisp")
    assert token.expires_at.tzinfo is not None
    assert token.refresh_token
    assert fxpay.Token.from_dict(token.to_dict()) == token
    sb.set_virtual_accounts(7, page_size=3)
    seen: list[fxpay.Token] = []
    s = c.user_session(token, on_token=seen.append)
    assert s.token == token
    accounts = s.list_virtual_accounts()
    assert len(accounts) == 7
    assert all(isinstance(a, fxpay.VirtualAccount) for a in accounts)
    va = accounts[0]
    assert va["currency"] == va.get("currency") == va.raw["currency"]
    assert va.get("no such field") is None
    assert isinstance(va, Mapping)
    assert not hasattr(va, "__setitem__")
    assert len(asyncio.run(s.list_virtual_accounts_async())) == 7
    new = c.refresh_token(token.refresh_token)
    assert new.refresh_token != token.refresh_token
    with pytest.raises(fxpay.OAuthError) as e:
        c.refresh_token(token.refresh_token)  # used: rotated away
    assert e.value.error == "invalid_grant"


def test_a_session_offers_a_new_token_to_on_token_before_using_it_and_again_if_it_raised(
    sb: fxpay.testing.Sandbox, c: fxpay.Client
) -> None:
    auth, callback = login(sb, c)
    token = c.exchange_code(auth, callback)
    offered: list[fxpay.Token] = []
    refuse = [True]

    def on_token(new: fxpay.Token) -> None:
        offered.append(new)
        if refuse[0]:
            raise RuntimeError("the store is down")

    s = c.user_session(token, on_token=on_token)
    sb.advance(3600)  # the access token has run out
    with pytest.raises(RuntimeError, match="the store is down"):
        s.list_virtual_accounts()
    refuse[0] = False
    s.list_virtual_accounts()
    assert len(offered) == 2
    assert offered[0] == offered[1] != token
    assert s.token == offered[1]
    assert sb.stats()["tokens_issued"]["refresh_token"] == 1


# -- webhooks ----------------------------------------------------------------------------------


def test_parse_deal_created_checks_the_nonce_in_any_header_case(sb: fxpay.testing.Sandbox) -> None:
    body, headers = fxpay.testing.deal_created_request(nonce="n-1", process_id=MISSING_UUID)
    assert headers["callback-nonce"] == "n-1"
    for case in (str.lower, str.upper, str.title):
        ev = fxpay.parse_deal_created(body, {case(k): v for k, v in headers.items()}, nonce="n-1")
        assert (ev.status, ev.ok, ev.process_id, ev.errors) == ("success", True, MISSING_UUID, [])
        assert isinstance(ev.deal_id, str)
    assert fxpay.parse_deal_created(body.decode()).process_id == MISSING_UUID  # str bodies too
    with pytest.raises(fxpay.WebhookVerificationError):
        fxpay.parse_deal_created(body, headers, nonce="n-2")
    with pytest.raises(fxpay.WebhookVerificationError):
        fxpay.parse_deal_created(body, {}, nonce="n-1")
    with pytest.raises(fxpay.WebhookVerificationError):
        fxpay.parse_deal_created(body, None, nonce="n-1")


def test_parse_deal_created_refuses_what_is_not_a_deal_created_event() -> None:
    for body in (b"[]", b"{}", b'{"eventType":"DealCreated","status":"maybe","eventBody":{}}', b"\xff"):
        with pytest.raises(fxpay.WebhookPayloadError):
            fxpay.parse_deal_created(body)
    with pytest.raises(fxpay.WebhookPayloadError, match="1 MiB"):
        fxpay.parse_deal_created(b"{" + b" " * (1024 * 1024))


def test_a_fail_event_made_without_errors_is_still_a_valid_event() -> None:
    """``deal_created_request(status="fail")`` makes up what is missing, as it does ids: the
    event it returns is one ``parse_deal_created`` takes (a fail event has at least one error)."""
    body, _ = fxpay.testing.deal_created_request(status="fail")
    ev = fxpay.parse_deal_created(body)
    assert (ev.status, ev.ok, ev.deal_id) == ("fail", False, None)
    assert len(ev.errors) == 1


def test_a_fail_event_has_no_deal_id_and_its_field_errors_parsed() -> None:
    body, _ = fxpay.testing.deal_created_request(
        status="fail",
        errors=[{"errorCode": "validation:deal:1008", "fieldName": "FundingSource", "message": "m"}, fxpay.FieldError("odd", None, "x")],
    )
    ev = fxpay.parse_deal_created(body)
    assert (ev.status, ev.ok, ev.deal_id) == ("fail", False, None)
    assert "dealId" not in ev.raw["eventBody"]
    first, second = ev.errors
    assert (first.error_code, first.field_name, first.message) == ("validation:deal:1008", "FundingSource", "m")
    assert (first.layer, first.component, first.number) == ("validation", "deal", 1008)
    assert (second.layer, second.component, second.number) == (None, None, None)


# -- errors ------------------------------------------------------------------------------------

HIERARCHY = [
    ("ConfigurationError", "FxPayError"),
    ("InvalidRequestError", "FxPayError"),
    ("InvalidRequestError", "ValueError"),
    ("TransportError", "FxPayError"),
    ("TimeoutError", "TransportError"),
    ("OAuthError", "ApiError"),
    ("StateMismatchError", "FxPayError"),
    ("ApiError", "FxPayError"),
    ("BadRequestError", "ApiError"),
    ("AuthenticationError", "ApiError"),
    ("PermissionDeniedError", "ApiError"),
    ("NotFoundError", "ApiError"),
    ("RateLimitError", "ApiError"),
    ("ServerError", "ApiError"),
    ("WebhookError", "FxPayError"),
    ("WebhookVerificationError", "WebhookError"),
    ("WebhookPayloadError", "WebhookError"),
    ("IdempotencyError", "FxPayError"),
    ("KeyReusedError", "IdempotencyError"),
    ("InProgressError", "IdempotencyError"),
    ("OutcomeUnknownError", "IdempotencyError"),
    ("JournalError", "IdempotencyError"),
]


@pytest.mark.parametrize(("name", "base"), HIERARCHY)
def test_the_error_tree(name: str, base: str) -> None:
    import fxpay.errors

    cls = getattr(fxpay, name)
    assert cls is getattr(fxpay.errors, name)
    assert cls.__module__ == "fxpay.errors"
    assert issubclass(cls, ValueError if base == "ValueError" else getattr(fxpay, base))
    assert issubclass(fxpay.FxPayError, Exception)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, fxpay.BadRequestError),
        (422, fxpay.BadRequestError),
        (401, fxpay.AuthenticationError),
        (403, fxpay.PermissionDeniedError),
        (404, fxpay.NotFoundError),
        (429, fxpay.RateLimitError),
        (500, fxpay.ServerError),
        (502, fxpay.ServerError),
    ],
)
def test_each_status_raises_its_api_error(sb: fxpay.testing.Sandbox, status: int, error: type[fxpay.ApiError]) -> None:
    with sb.client(max_retries=0) as c:
        qid = quote_id(c)
        # A 401 renews the token and replays once: it must come twice to be raised.
        sb.fail_next("/v1/payments/quotes/" + qid, status, times=2 if status == 401 else 1, retry_after=1 if status == 429 else None)
        with pytest.raises(error) as e:
            c.get_quote(qid)
    assert type(e.value) is error
    assert e.value.status == status
    assert isinstance(e.value.errors, list)
    if status == 429:
        assert e.value.retry_after == 1  # type: ignore[attr-defined]


# -- idempotency journal -----------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> fxpay.Journal:
    return fxpay.MemoryJournal() if request.param == "memory" else fxpay.SqliteJournal(tmp_path / "journal.db")


def test_journals_follow_the_protocol_and_a_key_needs_one(sb: fxpay.testing.Sandbox, c: fxpay.Client, journal: fxpay.Journal) -> None:
    assert isinstance(journal, fxpay.Journal)
    assert journal.get("absent") is None
    assert journal.unknown() == []
    for call in (
        lambda: c.create_quote(buy_currency="AUD", buy_amount="1", sell_currency="USD", idempotency_key="k"),
        lambda: c.create_beneficiary(make_beneficiary(), idempotency_key="k"),
        lambda: c.create_deal(quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=[LINE], idempotency_key="k"),
        lambda: c.create_spot_deal(quote_id=MISSING_UUID, funding_source=FUNDING, beneficiaries=[LINE], idempotency_key="k"),
    ):
        with pytest.raises(fxpay.ConfigurationError, match="journal"):
            call()
    assert sent(sb) == (0, 0)


def test_a_key_done_replays_reused_is_refused_and_released_is_free_again(sb: fxpay.testing.Sandbox, journal: fxpay.Journal) -> None:
    with sb.client(journal=journal) as c:
        args: dict[str, Any] = dict(buy_currency="AUD", buy_amount="100", sell_currency="USD")
        first = c.create_quote(**args, idempotency_key="q")
        before = sent(sb)
        assert c.create_quote(**args, idempotency_key="q") == first
        assert asyncio.run(c.create_quote_async(**args, idempotency_key="q")) == first
        with pytest.raises(fxpay.KeyReusedError):
            c.create_quote(**{**args, "buy_amount": "101"}, idempotency_key="q")
        assert sent(sb) == before
        entry = journal.get("q")
        assert entry is not None
        assert (entry.key, entry.operation, entry.state, entry.result, entry.deal_id, entry.error) == (
            "q",
            "create_quote",
            "done",
            first,
            None,
            None,
        )
        assert entry.created_at.tzinfo is not None
        assert entry.updated_at.tzinfo is not None
        sb.fail_next("/v1/payments/beneficiaries", 400)
        with pytest.raises(fxpay.BadRequestError):
            c.create_beneficiary(make_beneficiary(), idempotency_key="b")
        released = journal.get("b")
        assert released is not None
        assert released.state == "released"
        assert isinstance(c.create_quote(**args, idempotency_key="b"), str)  # any request now


def test_a_lost_answer_is_unknown_until_resolved(sb: fxpay.testing.Sandbox, journal: fxpay.Journal) -> None:
    with sb.client(journal=journal, max_retries=0) as c:
        args: dict[str, Any] = dict(buy_currency="AUD", buy_amount="100", sell_currency="USD")
        sb.fail_next("/v1/payments/quotes", 500)
        with pytest.raises(fxpay.OutcomeUnknownError) as e:
            c.create_quote(**args, idempotency_key="u")
        assert e.value.entry.state == "unknown"
        assert [x.key for x in journal.unknown()] == ["u"]
        before = sent(sb)
        with pytest.raises(fxpay.OutcomeUnknownError):
            c.create_quote(**args, idempotency_key="u")
        assert sent(sb) == before
        assert journal.resolve("u", result=MISSING_UUID).state == "done"
        assert c.create_quote(**args, idempotency_key="u") == MISSING_UUID
        sb.drop_next("/v1/payments/quotes", after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError):
            c.create_quote(**args, idempotency_key="v")
        assert journal.resolve("v", result=None).state == "released"
        assert isinstance(c.create_quote(**args, idempotency_key="v"), str)
        assert sent(sb)[0] == before[0] + 2


def test_a_pickled_idempotency_error_holds_no_secret_of_the_request(sb: fxpay.testing.Sandbox, journal: fxpay.Journal) -> None:
    with sb.client(journal=journal, max_retries=0) as c:
        qid = quote_id(c)
        line = deal_line(c, qid)
        sb.fail_next("/v1/payments/deals/spot", 503)
        with pytest.raises(fxpay.OutcomeUnknownError) as e:
            c.create_spot_deal(
                quote_id=qid,
                funding_source=FUNDING,
                beneficiaries=[line],
                callback_url="http://127.0.0.1:9/cb",
                callback_nonce="the-secret-nonce",
                idempotency_key="s",
            )
    blob = pickle.dumps(e.value)
    for secret in (b"the-secret-nonce", sb.client_secret.encode()):
        assert secret not in blob
    back = pickle.loads(blob)
    assert (back.entry.key, back.entry.state, back.entry.operation) == ("s", "unknown", "create_spot_deal")


def test_a_keyed_spot_deal_is_settled_by_its_notification(sb: fxpay.testing.Sandbox, journal: fxpay.Journal) -> None:
    with sb.client(journal=journal) as c:
        qid = quote_id(c)
        kwargs: dict[str, Any] = dict(
            quote_id=qid, funding_source=FUNDING, beneficiaries=[deal_line(c, qid)], callback_url="http://127.0.0.1:9/cb"
        )
        spot = c.create_spot_deal(**kwargs, idempotency_key="spot")
        assert spot.callback_nonce is not None
        assert len(spot.callback_nonce) * 6 >= 134
        body, headers = fxpay.testing.deal_created_request(process_id=spot.process_id, nonce=spot.callback_nonce)
        ev = fxpay.settle_deal_created(body, headers, journal=journal)
        entry = journal.get("spot")
        assert entry is not None
        assert (entry.state, entry.result, entry.deal_id) == ("done", spot.process_id, ev.deal_id)
        before = sent(sb)
        assert c.create_spot_deal(**kwargs, idempotency_key="spot").process_id == spot.process_id
        assert sent(sb) == before
        with pytest.raises(fxpay.WebhookVerificationError):
            fxpay.settle_deal_created(*fxpay.testing.deal_created_request(nonce="never-issued"), journal=journal)
        # Forward only (turn 5): a fail never releases a key that is done; it is logged, and the
        # key keeps what it had.
        body, headers = fxpay.testing.deal_created_request(status="fail", process_id=spot.process_id, nonce=spot.callback_nonce)
        fxpay.settle_deal_created(body, headers, journal=journal)
        assert journal.get("spot") == entry
        # A fail for a key whose answer was lost (unknown) releases it.
        sb.drop_next("/v1/payments/deals/spot", after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError):
            c.create_spot_deal(**kwargs, idempotency_key="spot-2")
        lost = journal.get("spot-2")
        assert lost is not None
        assert lost.state == "unknown"
        nonce = json.loads(lost.to_json())["nonce"]
        body, headers = fxpay.testing.deal_created_request(status="fail", nonce=nonce)
        fxpay.settle_deal_created(body, headers, journal=journal)
        failed = journal.get("spot-2")
        assert failed is not None
        assert failed.state == "released"


def test_sqlite_journal_files_are_0600_and_only_made_where_none_exists(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    fxpay.SqliteJournal(path).get("k")
    os.chmod(path, 0o644)
    fxpay.SqliteJournal(path).get("k")
    assert path.stat().st_mode & 0o777 == 0o600


# -- payouts -----------------------------------------------------------------------------------


def payout_rows(c: fxpay.Client, n: int) -> list[dict[str, Any]]:
    qid = quote_id(c)
    bid = deal_line(c, qid).beneficiary_id
    address = fxpay.Address("1 Main St", "Springfield", "IL", "62701", "US")
    rows: list[dict[str, Any]] = [
        dict(
            key=f"row-{i}",
            buy_currency="AUD",
            buy_amount=f"{100 + i}",
            sell_currency="USD",
            beneficiary_id=bid,
            pay_reason="Invoice",
            pay_reference=f"INV-{i}",
        )
        for i in range(n)
    ]
    rows.append(
        dict(
            key="row-new-beneficiary",
            buy_currency="AUD",
            buy_amount="50",
            sell_currency="USD",
            beneficiary=make_beneficiary(currency="USD", address=address),
            pay_reason="Invoice",
            pay_reference="INV-B",
        )
    )
    rows.append(
        dict(
            key="row-refused",
            buy_currency="AUD",
            buy_amount="-5",
            sell_currency="USD",
            beneficiary_id=bid,
            pay_reason="r",
            pay_reference="p",
        )
    )
    return rows


def test_pay_out_books_each_row_in_order_and_replays_on_a_rerun(sb: fxpay.testing.Sandbox) -> None:
    with sb.client(journal=fxpay.MemoryJournal()) as c:
        rows = payout_rows(c, 3)
        reports: list[fxpay.PayoutProgress] = []
        result = c.pay_out(rows, funding_source=FUNDING, progress=reports.append)
        assert isinstance(result, list)
        assert [r["key"] for r in result] == [r["key"] for r in rows]
        assert [r["status"] for r in result] == ["booked"] * 4 + ["refused"]
        for row, out in zip(rows, result, strict=True):
            assert {k: out[k] for k in row} == row
            assert {"quote_id", "beneficiary_id", "deal_id", "sell_amount", "status", "error"} <= set(out)
        assert all(isinstance(r["sell_amount"], Decimal) and r["error"] is None for r in result[:4])
        assert result[4]["error"]
        assert "buy_amount" in result[4]["error"]
        last = reports[-1]
        assert (last.done, last.total, last.booked, last.replayed, last.unknown, last.refused) == (5, 5, 4, 0, 0, 1)
        deals = len(sb.deals())
        again = c.pay_out(iter(rows), funding_source=FUNDING, progress=False)  # any iterable of mappings
        assert [r["status"] for r in again] == ["replayed"] * 4 + ["refused"]
        assert [r["deal_id"] for r in again] == [r["deal_id"] for r in result]
        assert len(sb.deals()) == deals


def test_pay_out_iter_yields_every_row_and_a_429_is_waited_out(sb: fxpay.testing.Sandbox) -> None:
    with sb.client(journal=fxpay.MemoryJournal(), max_retries=0) as c:
        rows = payout_rows(c, 2)[:2]
        sb.fail_next("/v1/payments/quotes", 429, retry_after=1)
        out = list(c.pay_out_iter((r for r in rows), funding_source=FUNDING, concurrency=1, max_rate=100.0))
        assert sorted(r["key"] for r in out) == ["row-0", "row-1"]
        assert {r["status"] for r in out} == {"booked"}

        async def collect() -> list[dict[str, Any]]:
            return [r async for r in c.pay_out_iter_async(rows, funding_source=FUNDING)]

        assert {r["status"] for r in asyncio.run(collect())} == {"replayed"}


# -- token stores ------------------------------------------------------------------------------


class DownStore:
    """A token store whose backend is down: every load and save raises."""

    def __init__(self) -> None:
        self.calls = 0

    def load(self, key: str) -> fxpay.Token | None:
        self.calls += 1
        raise ConnectionError("the store is down")

    def save(self, key: str, token: fxpay.Token) -> None:
        self.calls += 1
        raise ConnectionError("the store is down")


def test_a_store_outage_never_fails_a_payments_call(sb: fxpay.testing.Sandbox, caplog: pytest.LogCaptureFixture) -> None:
    assert isinstance(fxpay.MemoryTokenStore(), fxpay.TokenStore)
    assert isinstance(DownStore(), fxpay.TokenStore)
    store = DownStore()
    caplog.set_level(logging.WARNING, logger="fxpay")
    with sb.client(token_store=store) as c:
        qid = quote_id(c)
        for _ in range(3):
            assert c.get_quote(qid).id == qid
    assert store.calls >= 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("fxpay")]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


# -- the local sandbox -------------------------------------------------------------------------


def test_the_sandboxs_properties_controls_and_request_ids(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    assert sb.base_url.startswith("http://127.0.0.1:")
    assert not sb.base_url.endswith("/v1")
    assert sb.client_id
    assert sb.client_secret
    assert sb.username
    assert sb.password
    assert sb.redirect_uri.startswith("https://")
    assert {"token_requests", "requests", "quotes", "deals"} <= set(sb.stats())
    ids = {c.with_raw_response.get_quote(quote_id(c)).request_id for _ in range(3)}
    assert len(ids) == 3
    sb.delay_next("/v1/payments/quotes", 0.0)
    sb.drop_next("/v1/payments/quotes", after_processing=False)
    assert sb.stats()["faults_pending"] == 2
    with pytest.warns(fxpay.testing.UnfiredFaultWarning):
        sb.reset()
    assert sb.stats()["quotes"] == 0
    assert sb.deals() == []
    assert sb.deliveries() == []
    assert sb.stats()["faults_pending"] == 0


def test_send_deal_created_and_redeliver_return_and_record_the_delivery(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    url = "http://127.0.0.1:9/cb"  # nothing listens: the delivery is recorded with its failure
    sent_one = sb.send_deal_created(url, status="fail", errors=[fxpay.FieldError("validation:deal:1008", "F", "m")], nonce="n")
    assert sent_one["url"] == url
    assert sent_one["nonce"] == "n"
    assert "status" in sent_one
    body = sent_one["body"]
    assert body["status"] == "fail"
    assert "dealId" not in body["eventBody"]
    assert body["eventBody"]["processId"]
    assert sb.deliveries()[-1] == sent_one
    qid = quote_id(c)
    spot = c.create_spot_deal(quote_id=qid, funding_source=FUNDING, beneficiaries=[deal_line(c, qid)], callback_url=url)
    again = sb.redeliver(spot.process_id)
    first = next(d for d in sb.deliveries() if d["processId"] == spot.process_id)
    assert (again["body"], again["nonce"], again["url"]) == (first["body"], first["nonce"], first["url"])
    assert sb.deliveries()[-1] == again


def test_the_plugin_gives_fxpay_sandbox_and_fxpay_client(fxpay_sandbox: Any, fxpay_client: fxpay.Client) -> None:
    assert isinstance(fxpay_sandbox, (fxpay.testing.Sandbox, fxpay.testing.RemoteSandbox))
    assert fxpay_client.base_url.rstrip("/") == fxpay_sandbox.base_url.rstrip("/")


def test_sandbox_tokens_live_3599_seconds_and_refresh_tokens_rotate(sb: fxpay.testing.Sandbox, c: fxpay.Client) -> None:
    auth, callback = login(sb, c)
    token = c.exchange_code(auth, callback)
    assert token.expires_in == 3599
    assert c.refresh_token(token.refresh_token or "").expires_in == 3599


# -- record and replay -------------------------------------------------------------------------


def test_a_cassette_records_without_secrets_and_replays_with_no_network(sb: fxpay.testing.Sandbox, tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    with fxpay.Client(sb.client_id, sb.client_secret, base_url=sb.base_url, cassette=fxpay.testing.Cassette(path, mode="record")) as c:
        qid = quote_id(c)
        q = c.get_quote(qid)
    text = path.read_text()
    assert sb.client_secret not in text
    assert qid in text
    dead = "http://127.0.0.1:9"
    with fxpay.Client(sb.client_id, sb.client_secret, base_url=dead, cassette=fxpay.testing.Cassette(path)) as c:  # "once": the file exists
        assert quote_id(c) == qid
        assert c.get_quote(qid) == q
        with pytest.raises(fxpay.testing.CassetteMismatchError, match=f"GET .*{MISSING_UUID}") as e:
            c.get_quote(MISSING_UUID)
    assert isinstance(e.value, fxpay.FxPayError)
