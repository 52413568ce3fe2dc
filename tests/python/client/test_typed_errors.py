"""Only typed errors: every public call, given arbitrary Python values, either works or raises
``TypeError`` (a wrong type) or an ``fxpay.FxPayError`` (a wrong value, or the service's
answer). Any other exception (``AttributeError``, ``KeyError``, ``UnicodeEncodeError``,
``OverflowError``, a plain ``ValueError``, a pyo3 ``PanicException``...) fails the test.

Each argument is drawn either from valid values or from arbitrary ones (None, bools, ints
including 2**70, floats including nan and inf, Decimals, text with lone surrogates, CR/LF
and NULs, bytes, lists, dicts, plain objects). Calls that pass the checks go to an embedded
sandbox on loopback, so nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import pickle
import warnings
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fxpay
from fxpay.testing import Sandbox, UnfiredFaultWarning

EXAMPLES = int(os.environ.get("FXPAY_TYPED_ERRORS_EXAMPLES", "300"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

TYPED: tuple[type[BaseException], ...] = (TypeError, fxpay.FxPayError)

# -- arbitrary values -------------------------------------------------------------------------

_odd_chars = st.sampled_from(["\ud800", "\udfff", "\udc80", "\r", "\n", " ", "\t", "\x00", "\x7f", "é", "€", "/", "?"])
TEXT = st.text(alphabet=st.one_of(st.characters(), _odd_chars), max_size=24)
BIG_INTS = st.sampled_from([2**31, 2**63, 2**64, 2**70, -(2**70), 2**96, 10**40, 2**4000, -1, 0])
# The values that most often leak untyped errors, drawn half of the time.
NASTY = st.sampled_from([None, 2**70, "\ud800", "US\udfff", "a\r\nb", b"bytes", float("nan"), object(), {}, [], -(2**70)])
GENERAL = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    BIG_INTS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.sampled_from([Decimal("1.00000000000000000000000000001"), Decimal("1E+40"), Decimal("-0"), Decimal("sNaN")]),
    TEXT,
    st.binary(max_size=16),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    st.tuples(st.integers(), st.text(max_size=3)),
    st.builds(object),
)
ANY: st.SearchStrategy[Any] = st.one_of(NASTY, GENERAL)


def either(*valid: Any) -> st.SearchStrategy[Any]:
    """One of the valid values, or anything at all."""
    return st.one_of(st.sampled_from(valid), ANY)


class Args(dict[str, Any]):
    """A call's keyword arguments; `bad` names the one argument drawn to be wrong, if any."""

    bad: str | None = None


def _args(kw: dict[str, Any], bad: str | None) -> Args:
    a = Args(kw)
    a.bad = bad
    return a


def one_wrong(**valid: tuple[Any, ...]) -> st.SearchStrategy[Args]:
    """Arguments for a call. Half of the time all are valid but one, which is anything, so
    every parameter meets bad values alone (not only behind another parameter's error);
    otherwise each is valid or anything."""
    names = sorted(valid)
    single = st.sampled_from(names).flatmap(
        lambda bad: st.fixed_dictionaries({n: (ANY if n == bad else st.sampled_from(valid[n])) for n in names}).map(
            lambda kw: _args(kw, bad)
        )
    )
    mixed = st.fixed_dictionaries({n: either(*valid[n]) for n in names}).map(lambda kw: _args(kw, None))
    return st.one_of(single, mixed)


def typed_only(call: Callable[[], Any], args: Args | None = None) -> Any:
    """Runs `call`; a typed error is fine, anything else propagates and fails the test. When
    only one argument was wrong, a `TypeError` must name it."""
    try:
        return call()
    except TypeError as e:
        error = e
    except fxpay.FxPayError:
        return None
    if args is not None and args.bad is not None:
        assert args.bad in str(error), f"a TypeError for a wrong {args.bad} must name it: {error}"
    return None


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def client(sb: Sandbox) -> fxpay.Client:
    return sb.client()


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


ADDRESS = fxpay.Address(address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU")
BANK = fxpay.BankDetails(bank_name="B", bank_branch_name="G", branch_code="062000", account="12345678", bank_address=ADDRESS)
BENEFICIARY = fxpay.Beneficiary(
    currency="AUD", name="Acme", classification="Business", payment_reason="Invoice", bank_details=BANK, address=ADDRESS
)
DEAL_BENEFICIARY = fxpay.DealBeneficiary("3f2b6a1e-9c1d-4d7a-8b0e-2f6f1c2d3e4f", "10", "Invoice", "INV-1")
NOW = dt.datetime.now(dt.timezone.utc)
TOKEN = fxpay.Token(access_token="a", token_type="Bearer", expires_in=3599, expires_at=NOW, refresh_token="r", scope="gca-aisp")
UUID = "3f2b6a1e-9c1d-4d7a-8b0e-2f6f1c2d3e4f"
AMOUNTS = ("10", 10, Decimal("10.50"), 10.5, "1e3")
CURRENCIES = ("USD", "AUD", "EUR", "JPY")

# -- the client -------------------------------------------------------------------------------


@SETTINGS
@given(
    one_wrong(
        client_id=("id",),
        client_secret=("secret",),
        base_url=("http://127.0.0.1:1", "https://api.example.com"),
        timeout=(5.0, 1),
        max_retries=(0, 2),
        token_store=(None, fxpay.MemoryTokenStore()),
        user_agent=(None, "app/1"),
        ca_bundle=(None,),
    )
)
def test_client_constructor(kw: Args) -> None:
    rest = {k: v for k, v in kw.items() if k not in ("client_id", "client_secret")}
    typed_only(lambda: fxpay.Client(kw["client_id"], kw["client_secret"], **rest), kw)


@SETTINGS
@given(one_wrong(buy_currency=CURRENCIES, buy_amount=AMOUNTS, sell_currency=CURRENCIES, beneficiaries=(1, 2, 100)))
def test_create_quote(client: fxpay.Client, loop: asyncio.AbstractEventLoop, kw: Args) -> None:
    typed_only(lambda: client.create_quote(**kw), kw)
    typed_only(lambda: loop.run_until_complete(client.create_quote_async(**kw)), kw)


@SETTINGS
@given(quote_id=either(UUID, "q1"))
def test_get_quote(client: fxpay.Client, loop: asyncio.AbstractEventLoop, quote_id: Any) -> None:
    typed_only(lambda: client.get_quote(quote_id))
    typed_only(lambda: loop.run_until_complete(client.get_quote_async(quote_id)))


@SETTINGS
@given(beneficiary=either(BENEFICIARY))
def test_create_beneficiary(client: fxpay.Client, beneficiary: Any) -> None:
    typed_only(lambda: client.create_beneficiary(beneficiary))


DEAL_ARGS: dict[str, tuple[Any, ...]] = dict(
    quote_id=(UUID,),
    funding_source=("Own account",),
    beneficiaries=([DEAL_BENEFICIARY], (DEAL_BENEFICIARY,), [], [DEAL_BENEFICIARY, DEAL_BENEFICIARY]),
    channel=(None, "web"),
)


@SETTINGS
@given(one_wrong(**DEAL_ARGS), st.lists(either(DEAL_BENEFICIARY), max_size=3))
def test_create_deal(client: fxpay.Client, loop: asyncio.AbstractEventLoop, kw: Args, items: list[Any]) -> None:
    typed_only(lambda: client.create_deal(**kw), kw)
    typed_only(lambda: loop.run_until_complete(client.create_deal_async(**kw)), kw)
    typed_only(lambda: client.create_deal(**{**kw, "beneficiaries": items}))


@SETTINGS
@given(
    one_wrong(
        **DEAL_ARGS,
        callback_url=(None, "https://hooks.example/fx", "http://127.0.0.1:9/fx", "https://h.example/a b"),
        callback_nonce=(None, "n" * 32),
    )
)
def test_create_spot_deal(client: fxpay.Client, kw: Args) -> None:
    typed_only(lambda: client.create_spot_deal(**kw), kw)


@SETTINGS
@given(one_wrong(redirect_uri=("https://app.example.test/callback", "com.example.app:/cb"), state=(None, "s" * 32)))
def test_authorization_url(client: fxpay.Client, kw: Args) -> None:
    typed_only(lambda: client.authorization_url(kw["redirect_uri"], state=kw["state"]), kw)


@SETTINGS
@given(data=st.data())
def test_exchange_code(client: fxpay.Client, sb: Sandbox, data: st.DataObject) -> None:
    auth = client.authorization_url(sb.redirect_uri)
    kw = data.draw(
        one_wrong(auth=(auth,), callback=(f"{sb.redirect_uri}?code=x&state={auth.state}", "code=x&state=y", "error=access_denied"))
    )
    typed_only(lambda: client.exchange_code(kw["auth"], kw["callback"]), kw)


@SETTINGS
@given(refresh_token=either("r", ""))
def test_refresh_token(client: fxpay.Client, refresh_token: Any) -> None:
    typed_only(lambda: client.refresh_token(refresh_token))


@SETTINGS
@given(one_wrong(token=(TOKEN,), on_token=(None, lambda t: None), key=(None, "user-1")))
def test_user_session(client: fxpay.Client, kw: Args) -> None:
    session = typed_only(lambda: client.user_session(kw["token"], on_token=kw["on_token"], key=kw["key"]), kw)
    if session is not None:
        typed_only(session.list_virtual_accounts)


# -- models -----------------------------------------------------------------------------------


def _use(model: Any) -> None:
    """What users do with a model: show it, serialize it, hash it, pickle it."""
    repr(model)
    model.to_dict()
    hash(model)
    assert pickle.loads(pickle.dumps(model)) == model


INPUT_MODELS: dict[type, dict[str, tuple[Any, ...]]] = {
    fxpay.Address: dict(
        address_line=("1 George St",), city_suburb=("Sydney",), state_province=("NSW",), post_code=("2000",), country=("AU",)
    ),
    fxpay.BankDetails: dict(bank_name=("B",), bank_branch_name=("G",), branch_code=("1",), account=("2",), bank_address=(ADDRESS,)),
    fxpay.Beneficiary: dict(
        currency=("AUD",),
        name=("Acme",),
        classification=("Business",),
        payment_reason=("Invoice",),
        bank_details=(BANK,),
        address=(ADDRESS,),
    ),
    fxpay.DealBeneficiary: dict(beneficiary_id=(UUID,), amount=AMOUNTS, pay_reason=("r",), pay_reference=("x",)),
    fxpay.Token: dict(
        access_token=("a",),
        token_type=("Bearer",),
        expires_in=(3599, 0),
        expires_at=(NOW,),
        refresh_token=(None, "r"),
        scope=(None, "payments"),
    ),
    fxpay.AuthorizationRequest: dict(url=("https://x.example/a",), state=("s",), redirect_uri=("https://app/cb",)),
}


@pytest.mark.parametrize("model", list(INPUT_MODELS), ids=lambda m: m.__name__)
def test_input_models(model: type, client: fxpay.Client) -> None:
    @SETTINGS
    @given(one_wrong(**INPUT_MODELS[model]))
    def run(kw: Args) -> None:
        made = typed_only(lambda: model(**kw), kw)
        if made is not None:
            typed_only(lambda: _use(made))
            # A model that was accepted is accepted by the calls that take it.
            if isinstance(made, fxpay.Beneficiary):
                typed_only(lambda: client.create_beneficiary(made))
            elif isinstance(made, fxpay.Token):
                typed_only(lambda: client.user_session(made))
            elif isinstance(made, fxpay.DealBeneficiary):
                typed_only(lambda: client.create_deal(quote_id=UUID, funding_source="Own account", beneficiaries=[made]))

    run()


OUTPUT_MODELS: dict[type, int] = {
    fxpay.Quote: 10,
    fxpay.Freebies: 3,
    fxpay.Deal: 5,
    fxpay.SpotDeal: 3,
    fxpay.DealCreated: 3,
    fxpay.FieldError: 3,
}


@pytest.mark.parametrize("model", list(OUTPUT_MODELS), ids=lambda m: m.__name__)
def test_output_model_constructors(model: type) -> None:
    @SETTINGS
    @given(st.lists(ANY, min_size=OUTPUT_MODELS[model], max_size=OUTPUT_MODELS[model] + 1))
    def run(args: list[Any]) -> None:
        made = typed_only(lambda: model(*args))
        if made is not None:
            typed_only(lambda: repr(made))

    run()


@SETTINGS
@given(data=st.one_of(ANY, st.dictionaries(st.text(max_size=8), ANY, max_size=4)))
def test_virtual_account(data: Any) -> None:
    va = typed_only(lambda: fxpay.VirtualAccount(data))
    if va is not None:
        repr(va)
        typed_only(lambda: hash(va))


TOKEN_KEYS = ["access_token", "token_type", "expires_in", "expires_at", "refresh_token", "scope"]


@SETTINGS
@given(
    d=st.one_of(
        ANY,
        st.builds(
            lambda base, extra: {**base, **extra},
            st.fixed_dictionaries({}, optional={k: st.just(v) for k, v in TOKEN.to_dict().items()}),
            st.dictionaries(st.sampled_from(TOKEN_KEYS), st.one_of(ANY, st.just(NOW.isoformat()), st.just("not a date")), max_size=3),
        ),
    )
)
def test_token_from_dict(client: fxpay.Client, d: Any) -> None:
    token = typed_only(lambda: fxpay.Token.from_dict(d))
    if token is not None:
        _use(token)
        typed_only(lambda: client.user_session(token))


SUCCESS = {"eventType": "DealCreated", "status": "success", "eventBody": {"processId": UUID, "dealId": UUID}}


def _bodies() -> st.SearchStrategy[Any]:
    extras = st.dictionaries(
        st.text(max_size=6),
        st.one_of(st.integers(), BIG_INTS, st.floats(allow_nan=False, allow_infinity=False), TEXT),
        max_size=2,
    )
    documents = st.builds(lambda extra: json.dumps({**SUCCESS, **extra}), extras)
    huge_number = st.just(json.dumps(SUCCESS)[:-1] + ', "n": ' + "7" * 5000 + "}")
    return st.one_of(ANY, documents, documents.map(str.encode), huge_number, huge_number.map(str.encode))


@SETTINGS
@given(
    body=_bodies(),
    headers=st.one_of(ANY, st.dictionaries(st.one_of(TEXT, st.binary(max_size=4), st.just("callback-nonce")), ANY, max_size=3)),
    nonce=either(None, "n" * 32),
)
def test_parse_deal_created(body: Any, headers: Any, nonce: Any) -> None:
    ev = typed_only(lambda: fxpay.parse_deal_created(body, headers, nonce=nonce))
    if ev is not None:
        # `raw` never raises for a body that verified.
        _ = ev.raw
        repr(ev)


@SETTINGS
@given(models=st.one_of(ANY, st.lists(st.one_of(ANY, st.just(TOKEN), st.just(DEAL_BENEFICIARY)), max_size=3)))
def test_to_records(models: Any) -> None:
    typed_only(lambda: fxpay.to_records(models))


# -- the sandbox's own controls --------------------------------------------------------------


@pytest.fixture(scope="module")
def control_sb() -> Iterator[Sandbox]:
    # Its own sandbox: the faults drawn here must not reach the other tests' requests. They
    # are set to test the controls' argument checks and are never meant to fire.
    with Sandbox() as sandbox:
        yield sandbox
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnfiredFaultWarning)
            sandbox.close()


@SETTINGS
@given(one_wrong(host=("127.0.0.1",), port=(0,), body_timeout=(10.0, 1)))
def test_sandbox_constructor(kw: Args) -> None:
    made = typed_only(lambda: Sandbox(**kw), kw)
    if made is not None:
        made.close()


@SETTINGS
@given(data=st.data())
def test_sandbox_controls(control_sb: Sandbox, data: st.DataObject) -> None:
    sb = control_sb
    auth_url = sb.client().authorization_url(sb.redirect_uri).url
    calls: dict[str, tuple[Callable[..., Any], dict[str, tuple[Any, ...]]]] = {
        "approve": (lambda a: sb.approve(a["auth_url"], allow=a["allow"]), dict(auth_url=(auth_url,), allow=(True, False))),
        "advance": (lambda a: sb.advance(a["seconds"]), dict(seconds=(0, 1.5))),
        "deal_status": (lambda a: sb.deal_status(a["deal_id"]), dict(deal_id=(UUID,))),
        "fail_next": (
            lambda a: sb.fail_next(a["path"], a["status"], times=a["times"], retry_after=a["retry_after"]),
            dict(path=("/v1/nowhere",), status=(503, 429), times=(1, 2), retry_after=(None, 1)),
        ),
        "drop_next": (
            lambda a: sb.drop_next(a["path"], after_processing=a["after_processing"]),
            dict(path=("/v1/nowhere",), after_processing=(True,)),
        ),
        "delay_next": (lambda a: sb.delay_next(a["path"], a["seconds"]), dict(path=("/v1/nowhere",), seconds=(0.0, 1))),
        "register_client": (
            lambda a: sb.register_client(a["client_id"], a["client_secret"], a["redirect_uris"]),
            dict(client_id=("other",), client_secret=("s",), redirect_uris=(["https://app.example/cb"], None)),
        ),
    }
    name = data.draw(st.sampled_from(sorted(calls)))
    call, valid = calls[name]
    kw = data.draw(one_wrong(**valid))
    typed_only(lambda: call(kw), kw)


# -- the examples named in the issue ---------------------------------------------------------


def test_the_named_leaks_are_typed(client: fxpay.Client, sb: Sandbox) -> None:
    before = sb.stats()["requests"]
    with pytest.raises(TypeError, match="bank_details"):
        fxpay.Beneficiary(
            currency="AUD",
            name="n",
            classification="Business",
            payment_reason="r",
            bank_details=None,
            address=ADDRESS,  # type: ignore[arg-type]
        )
    with pytest.raises(TypeError, match="token"):
        client.user_session("tok")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="auth"):
        client.exchange_code(None, "code=x&state=y")  # type: ignore[arg-type]
    with pytest.raises(fxpay.InvalidRequestError, match="access_token"):
        fxpay.Token.from_dict({})
    with pytest.raises(fxpay.InvalidRequestError, match="surrogate"):
        client.create_quote(buy_currency="US\ud800", buy_amount=1, sell_currency="AUD")
    with pytest.raises(fxpay.InvalidRequestError, match="beneficiaries"):
        client.create_quote(buy_currency="USD", buy_amount=1, sell_currency="AUD", beneficiaries=2**70)
    with pytest.raises(fxpay.ConfigurationError, match="max_retries"):
        fxpay.Client("id", "secret", base_url=sb.base_url, max_retries=2**70)
    with pytest.raises(TypeError, match="body"):
        fxpay.parse_deal_created(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="header names"):
        fxpay.parse_deal_created(json.dumps(SUCCESS), {b"callback-nonce": "n"}, nonce="n")  # type: ignore[dict-item]
    assert sb.stats()["requests"] == before


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example/fx\r\nX-Injected: 1",
        "https://hooks.example/fx\n",
        "https://hooks.example/f x",
        " https://hooks.example/fx",
        "https://hooks.example/\tfx",
        "https://hooks.example/fx\x00",
    ],
)
def test_callback_url_that_cannot_be_a_header_is_refused_before_sending(client: fxpay.Client, sb: Sandbox, url: str) -> None:
    before = sb.stats()["requests"]
    with pytest.raises(fxpay.InvalidRequestError, match="callback_url"):
        client.create_spot_deal(quote_id=UUID, funding_source="Own account", beneficiaries=[DEAL_BENEFICIARY], callback_url=url)
    assert sb.stats()["requests"] == before


def test_deal_created_raw_keeps_a_huge_integer_exactly() -> None:
    body = json.dumps(SUCCESS)[:-1] + ', "n": ' + "7" * 5000 + "}"
    ev = fxpay.parse_deal_created(body)
    assert ev.raw["n"] == Decimal("7" * 5000)
    assert ev.raw["eventBody"]["processId"] == UUID
