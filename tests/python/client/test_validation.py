"""Bad inputs raise InvalidRequestError / ConfigurationError and send nothing."""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from decimal import Decimal

import pytest

import fxpay

from conftest import make_beneficiary, need

PID = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"


def requests_made(sb: fxpay.testing.Sandbox) -> int:  # type: ignore[name-defined]
    return int(sb.stats()["requests"])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(buy_currency="usd", buy_amount=1, sell_currency="AUD"),
        dict(buy_currency="USD", buy_amount=1, sell_currency="XXY"),
        dict(buy_currency="US", buy_amount=1, sell_currency="AUD"),
        dict(buy_currency="USD", buy_amount=0, sell_currency="AUD"),
        dict(buy_currency="USD", buy_amount=-5, sell_currency="AUD"),
        dict(buy_currency="USD", buy_amount=Decimal("NaN"), sell_currency="AUD"),
        dict(buy_currency="USD", buy_amount=Decimal("Infinity"), sell_currency="AUD"),
        dict(buy_currency="USD", buy_amount=math.inf, sell_currency="AUD"),
        dict(buy_currency="USD", buy_amount=math.nan, sell_currency="AUD"),
        dict(buy_currency="USD", buy_amount="ten", sell_currency="AUD"),
        dict(buy_currency="USD", buy_amount=1, sell_currency="AUD", beneficiaries=0),
    ],
)
def test_bad_quote_inputs_send_nothing(fxpay_sandbox, kwargs) -> None:  # type: ignore[no-untyped-def]
    c = fxpay_sandbox.client()
    before = requests_made(fxpay_sandbox)
    with pytest.raises(fxpay.InvalidRequestError) as ei:
        c.create_quote(**kwargs)
    assert isinstance(ei.value, ValueError)
    assert str(ei.value)
    assert requests_made(fxpay_sandbox) == before
    assert fxpay_sandbox.stats()["token_requests"] == 0


@pytest.mark.parametrize("amount", [True, [1], None, b"10"])
def test_an_amount_of_a_wrong_type_is_a_type_error_naming_it(fxpay_sandbox, amount) -> None:  # type: ignore[no-untyped-def]
    # A wrong type is a TypeError naming the parameter (API.md); a wrong value an InvalidRequestError.
    c = fxpay_sandbox.client()
    with pytest.raises(TypeError, match="buy_amount"):
        c.create_quote(buy_currency="USD", buy_amount=amount, sell_currency="AUD")
    with pytest.raises(TypeError, match="buy_amount"):
        c.create_quote_async(buy_currency="USD", buy_amount=amount, sell_currency="AUD")
    assert requests_made(fxpay_sandbox) == 0


@pytest.mark.parametrize("amount", [True, False, [1], None, b"10", object(), {"amount": 1}])
def test_an_amount_of_a_wrong_type_is_refused_alike_everywhere(fxpay_sandbox, amount) -> None:  # type: ignore[no-untyped-def]
    # One rule in one place: a Client argument and a model field refuse a wrong-typed amount
    # (a bool included) with the same TypeError, naming the parameter or the field.
    c = fxpay_sandbox.client()
    with pytest.raises(TypeError) as by_client:
        c.create_quote(buy_currency="USD", buy_amount=amount, sell_currency="AUD")
    with pytest.raises(TypeError) as by_model:
        fxpay.DealBeneficiary(PID, amount, "Invoice", "INV-1")
    with pytest.raises(TypeError) as by_freebies:
        fxpay.Freebies(total=amount, claimed=0, remaining=0)
    assert str(by_client.value).startswith("buy_amount must be a Decimal, int, str or float, not ")
    assert str(by_model.value) == str(by_client.value).replace("buy_amount", "DealBeneficiary.amount")
    assert str(by_freebies.value) == str(by_client.value).replace("buy_amount", "Freebies.total")
    assert not isinstance(by_model.value, fxpay.FxPayError)
    assert requests_made(fxpay_sandbox) == 0


class _LoudFloat(float):
    def __repr__(self) -> str:
        return f"_LoudFloat({float(self)!r})"

    __str__ = __repr__


class _LoudInt(int):
    def __repr__(self) -> str:
        return f"_LoudInt({int(self)})"

    __str__ = __repr__

    def bit_length(self) -> int:
        return 1000


class _LoudStr(str):
    def __str__(self) -> str:
        return "not 12.50"


class _LoudDecimal(Decimal):
    def __str__(self) -> str:
        return "not 12.50"


def _numpy_float() -> float:
    np = need("numpy")
    value: float = np.float64(12.5)
    return value


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: _LoudFloat(12.5), "12.5"),
        (lambda: _LoudInt(12), "12"),
        (lambda: _LoudStr("12.50"), "12.50"),
        (lambda: _LoudDecimal("12.50"), "12.50"),
        (_numpy_float, "12.5"),  # numpy 2: repr(np.float64(12.5)) == "np.float64(12.5)"
    ],
    ids=["float", "int", "str", "Decimal", "numpy.float64"],
)
def test_an_amount_of_a_subclass_is_read_by_its_value(fxpay_sandbox, make: Callable[[], object], expected: str) -> None:  # type: ignore[no-untyped-def]
    # A float is taken through its shortest repr (API.md), an int, a str and a Decimal
    # through their digits: a subclass's own repr or str (numpy's float64 is a float
    # subclass) is not asked, and neither is its bit_length.
    amount = make()
    c = fxpay_sandbox.client()
    qid = c.create_quote(buy_currency="USD", buy_amount=amount, sell_currency="AUD")
    assert c.get_quote(qid).buy_amount == Decimal(expected)
    assert fxpay.DealBeneficiary(PID, amount, "Invoice", "INV-1").amount == Decimal(expected)  # type: ignore[arg-type]
    assert fxpay.Freebies(total=amount, claimed=0, remaining=0).total == Decimal(expected)  # type: ignore[arg-type]


@pytest.mark.parametrize("amount", ["1\ud800", "\udfff", _LoudStr("12\ud800")])
def test_an_amount_holding_a_lone_surrogate_is_an_invalid_request_naming_it(fxpay_sandbox, amount: str) -> None:  # type: ignore[no-untyped-def]
    # Not Unicode text: a wrong value, so an InvalidRequestError (an FxPayError) naming the
    # parameter or field, never a bare UnicodeEncodeError.
    c = fxpay_sandbox.client()
    with pytest.raises(fxpay.InvalidRequestError, match="buy_amount holds a lone surrogate"):
        c.create_quote(buy_currency="USD", buy_amount=amount, sell_currency="AUD")
    with pytest.raises(fxpay.InvalidRequestError, match=r"DealBeneficiary\.amount holds a lone surrogate"):
        fxpay.DealBeneficiary(PID, amount, "Invoice", "INV-1")
    assert requests_made(fxpay_sandbox) == 0


async def test_bad_inputs_async_send_nothing(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    c = fxpay_sandbox.client()
    with pytest.raises(fxpay.InvalidRequestError):
        await c.create_quote_async(buy_currency="USD", buy_amount=-1, sell_currency="AUD")
    with pytest.raises(fxpay.InvalidRequestError):
        await c.get_quote_async("../etc/passwd")
    assert requests_made(fxpay_sandbox) == 0


@pytest.mark.parametrize(
    "overrides",
    [
        dict(currency="AUDX"),
        dict(payment_reason=""),
        dict(payment_reason="   "),
        dict(name=""),
        dict(address=fxpay.Address(address_line="x", city_suburb="y", state_province="z", post_code="1", country="XX")),
    ],
)
def test_bad_beneficiaries_send_nothing(fxpay_sandbox, overrides) -> None:  # type: ignore[no-untyped-def]
    c = fxpay_sandbox.client()
    with pytest.raises(fxpay.InvalidRequestError):
        c.create_beneficiary(make_beneficiary(**overrides))
    assert requests_made(fxpay_sandbox) == 0


@pytest.mark.parametrize("amount", [0, -1, "0.00", Decimal("-0.01"), math.nan, "abc"])
def test_deal_beneficiary_amounts(amount: object) -> None:
    with pytest.raises(fxpay.InvalidRequestError):
        fxpay.DealBeneficiary("b", amount, "r", "x")  # type: ignore[arg-type]


def test_deal_inputs_send_nothing(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    c = fxpay_sandbox.client()
    ok = fxpay.DealBeneficiary("b1", "10", "r", "x")
    with pytest.raises(fxpay.InvalidRequestError):
        c.create_deal(quote_id="", funding_source="Own account", beneficiaries=[ok])
    with pytest.raises(fxpay.InvalidRequestError):
        c.create_deal(quote_id="q1", funding_source="Own account", beneficiaries=[])
    # A wrong type is a TypeError naming the parameter (API.md), not a wrong value.
    with pytest.raises(TypeError, match=r"beneficiaries\[0\]"):
        c.create_deal(quote_id="q1", funding_source="Own account", beneficiaries=[{"amount": 1}])  # type: ignore[list-item]
    with pytest.raises(fxpay.InvalidRequestError):
        c.create_spot_deal(quote_id="q1", funding_source="Own account", beneficiaries=[ok], callback_url="ftp://x/y")
    with pytest.raises(fxpay.InvalidRequestError):
        c.create_spot_deal(quote_id="q1", funding_source="Own account", beneficiaries=[ok], callback_nonce="n")
    assert requests_made(fxpay_sandbox) == 0


@pytest.mark.parametrize(
    "base_url",
    ["http://example.com", "ftp://example.com", "example.com", "https://example.com/v1", "http://10.1.2.3:80", ""],
)
def test_base_url_rules(base_url: str) -> None:
    with pytest.raises(fxpay.ConfigurationError):
        fxpay.Client("id", "secret", base_url=base_url)


@pytest.mark.parametrize("base_url", ["https://api.example.com", "http://127.0.0.1:1", "http://localhost:1", "http://[::1]:1"])
def test_base_url_accepted(base_url: str) -> None:
    assert fxpay.Client("id", "secret", base_url=base_url).base_url == base_url


def test_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FXPAY_CLIENT_ID", raising=False)
    with pytest.raises(fxpay.ConfigurationError, match="FXPAY_CLIENT_ID"):
        fxpay.Client.from_env()
    monkeypatch.setenv("FXPAY_CLIENT_ID", "cid")
    monkeypatch.setenv("FXPAY_CLIENT_SECRET", "sec")
    monkeypatch.setenv("FXPAY_BASE_URL", "https://api.example.com")
    assert fxpay.Client.from_env().client_id == "cid"


def test_redirect_uri_rules(fxpay_client: fxpay.Client) -> None:
    with pytest.raises(fxpay.ConfigurationError):
        fxpay_client.authorization_url("http://app.example/cb")
    auth = fxpay_client.authorization_url("com.example.app:/cb")
    assert auth.redirect_uri == "com.example.app:/cb"


def test_fxpay_testing_is_reachable_from_the_package() -> None:
    import subprocess
    import sys

    code = "import fxpay\nwith fxpay.testing.Sandbox() as sb: print(sb.base_url.startswith('http://127.0.0.1:'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr


# -- exact, or refused -------------------------------------------------------------------------

INEXACT_AMOUNTS = [
    # more than 28 significant digits: a core Decimal would round them
    "1.00000000000000000000000000001",
    Decimal("1.00000000000000000000000000001"),
    "12345678901234567890.123456789",
    Decimal("0.00000000000000000000000000001"),  # 29 decimal places
    # too large for a core Decimal
    "1e40",
    Decimal("1E+29"),
    10**29,
    2**96,
    2**200,
    10**5000,  # more digits than Python's int-to-str limit
    "9" * 5000,
]


def _amount_id(a: object) -> str:
    if isinstance(a, int):
        return f"int-{a.bit_length()}-bits"
    return f"{type(a).__name__}-{str(a)[:24]}"


@pytest.mark.parametrize("amount", INEXACT_AMOUNTS, ids=_amount_id)
def test_amounts_are_exact_or_refused(fxpay_sandbox, amount: object) -> None:  # type: ignore[no-untyped-def]
    c = fxpay_sandbox.client()
    with pytest.raises(fxpay.InvalidRequestError, match="exactly"):
        c.create_quote(buy_currency="USD", buy_amount=amount, sell_currency="AUD")
    with pytest.raises(fxpay.InvalidRequestError, match="exactly"):
        fxpay.DealBeneficiary("b", amount, "r", "x")  # type: ignore[arg-type]
    assert requests_made(fxpay_sandbox) == 0


@pytest.mark.parametrize(
    ("amount", "kept"),
    [
        ("1.000000000000000000000000001", "1.000000000000000000000000001"),  # 28 digits: kept
        (Decimal("9999999999999999999999999999"), "9999999999999999999999999999"),
        (10**27, str(10**27)),
        ("0.10", "0.10"),
        (Decimal("1.0000000000000000000000000000000"), "1"),  # only zeros dropped: same value
    ],
)
def test_amounts_that_fit_are_kept_exactly(amount: object, kept: str) -> None:
    b = fxpay.DealBeneficiary("b", amount, "r", "x")  # type: ignore[arg-type]
    assert str(b.amount) == kept
    assert b.amount == Decimal(str(amount))


def test_a_wrong_type_is_the_same_type_error_for_an_argument_and_a_model_field(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    # One rule per kind (crates/fxpay-python/src/convert/): a bool where text or a count is
    # wanted is a TypeError naming the parameter, whether it is a Client argument or a field.
    c = fxpay_sandbox.client()
    when = datetime.datetime.now(datetime.timezone.utc)
    cases: list[tuple[Callable[[], object], str, Callable[[], object], str]] = [
        (lambda: c.get_quote(True), "quote_id", lambda: fxpay.Deal(True, "q", "f"), "Deal.deal_id"),  # type: ignore[arg-type]
        (
            lambda: c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="AUD", beneficiaries=True),
            "beneficiaries",
            lambda: fxpay.Token("a", "Bearer", True, when),  # type: ignore[arg-type]
            "Token.expires_in",
        ),
        (
            lambda: c.create_quote(buy_currency="USD", buy_amount=True, sell_currency="AUD"),
            "buy_amount",
            lambda: fxpay.DealBeneficiary("b", True, "r", "x"),  # type: ignore[arg-type]
            "DealBeneficiary.amount",
        ),
    ]
    for by_client, param, by_model, field in cases:
        with pytest.raises(TypeError) as client_error:
            by_client()
        with pytest.raises(TypeError) as model_error:
            by_model()
        assert not isinstance(client_error.value, fxpay.FxPayError)
        assert not isinstance(model_error.value, fxpay.FxPayError)
        assert str(client_error.value).startswith(f"{param} must be ")
        assert str(model_error.value) == str(client_error.value).replace(param, field, 1)
    assert requests_made(fxpay_sandbox) == 0


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("timeout", "timeout must be a number of seconds, not bool"),
        ("deadline", "deadline must be a number of seconds, not bool"),
        ("max_retries", "max_retries must be an int, not bool"),
        ("token_store", "token_store must have load(key) and save(key, token), not bool"),
        ("cassette", "cassette must be a fxpay.testing.Cassette, not bool"),
        ("ca_bundle", "ca_bundle must be a str or an os.PathLike, not bool"),
    ],
)
def test_a_client_argument_of_a_wrong_type_is_a_type_error_naming_it(fxpay_sandbox, name: str, message: str) -> None:  # type: ignore[no-untyped-def]
    kwargs = {"base_url": fxpay_sandbox.base_url, name: True}
    with pytest.raises(TypeError) as ei:
        fxpay.Client(fxpay_sandbox.client_id, fxpay_sandbox.client_secret, **kwargs)
    assert str(ei.value) == message
    if name in ("timeout", "deadline", "max_retries"):
        # The same rule where a client's options change.
        with pytest.raises(TypeError) as derived:
            fxpay_sandbox.client().with_options(**{name: True})
        assert str(derived.value) == message
