"""Every model is a class of the compiled module, made from its one Rust definition: identity
with ``fxpay._fxpay``, pickle, equality and hash by value, ``__match_args__``, ``replace``,
immutability, keyword construction with typed errors, and reprs without secrets."""

from __future__ import annotations

import collections.abc
import copy
import datetime as dt
import inspect
import json
import pickle
import subprocess
import sys
import threading
from decimal import Decimal
from typing import Any

import pytest

import fxpay
import fxpay.models
from fxpay import _fxpay

from conftest import MODEL_NAMES

NAMES = MODEL_NAMES
UUID = "3f2b6a1e-9c1d-4d7a-8b0e-2f6f1c2d3e4f"
WHEN = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def examples() -> dict[str, Any]:
    """One instance of every model with fields, built by hand."""
    address = fxpay.Address(address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU")
    bank = fxpay.BankDetails(bank_name="B", bank_branch_name="G", branch_code="062000", account="1234", bank_address=address)
    line = fxpay.DealBeneficiary(UUID, "10.50", "Invoice", "INV-1")
    freebies = fxpay.Freebies(3, 1, 2)
    return {
        "Address": address,
        "BankDetails": bank,
        "Beneficiary": fxpay.Beneficiary(
            currency="AUD", name="Acme", classification="Business", payment_reason="Invoice", bank_details=bank, address=address
        ),
        "DealBeneficiary": line,
        "Freebies": freebies,
        "Quote": fxpay.Quote(UUID, "USD", "1000.00", "AUD", "1523.45", "1.523450", "0.656405", "0", "USD", freebies),
        "Deal": fxpay.Deal(UUID, UUID, "Own account", None, [line]),
        "SpotDeal": fxpay.SpotDeal(UUID, "https://app.example/cb", "NONCE-SECRET"),
        "Token": fxpay.Token("ACCESS-SECRET", "Bearer", 3599, WHEN, "REFRESH-SECRET", "gca-aisp"),
        "AuthorizationRequest": fxpay.AuthorizationRequest(
            "https://x.example/a?state=STATE-SECRET", "STATE-SECRET", "https://app/cb", "VERIFIER-SECRET"
        ),
        "FieldError": fxpay.FieldError("validation:beneficiary:1004", "PaymentReason", "Payment reason is required"),
        "DealCreated": fxpay.DealCreated("fail", UUID, None, [fxpay.FieldError("a:b:1", "f", "m")]),
    }


@pytest.mark.parametrize("name", NAMES)
def test_every_model_is_a_class_of_the_compiled_module(name: str) -> None:
    cls = getattr(fxpay, name)
    assert cls is getattr(_fxpay, name) is getattr(fxpay.models, name)
    assert cls.__module__ == "fxpay._fxpay"
    assert cls.__doc__
    assert len(cls.__doc__) > 20


@pytest.mark.parametrize("name", sorted(examples()))
def test_pickle_eq_hash_and_copies(name: str) -> None:
    m = examples()[name]
    back = pickle.loads(pickle.dumps(m))
    assert back == m
    assert hash(back) == hash(m)
    assert type(back) is type(m)
    assert examples()[name] == m
    assert hash(examples()[name]) == hash(m)
    assert copy.copy(m) == m
    assert copy.deepcopy(m) == m
    assert len({m, back, examples()[name]}) == 1
    assert m != object()
    assert m != None  # noqa: E711 -- the model's __ne__ against None is what is tested


def test_signatures_are_built_on_first_use_so_import_stays_cheap() -> None:
    # `inspect` (with ast, dis and tokenize) would be half of `import fxpay`: the classes'
    # __signature__ is built when something asks for it.
    code = "import sys, fxpay; print(sorted({'inspect', 'ast', 'dis'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    sig = inspect.signature(fxpay.Quote)
    assert sig is inspect.signature(fxpay.Quote), "built once"
    assert sig.parameters["fee"].default is None
    assert fxpay.Quote.__signature__ is sig


@pytest.mark.parametrize("name", sorted(examples()))
def test_match_args_replace_and_immutability(name: str) -> None:
    m = examples()[name]
    cls = type(m)
    fields = cls.__match_args__
    assert fields
    assert all(isinstance(f, str) for f in fields)
    assert list(inspect.signature(cls).parameters) == list(fields)
    # The fields in order rebuild the model, positionally and by keyword.
    values = [getattr(m, f) for f in fields]
    assert cls(*values) == m
    assert cls(**dict(zip(fields, values, strict=False))) == m
    assert m.replace() == m
    first = fields[0]
    with pytest.raises(AttributeError, match="immutable"):
        setattr(m, first, getattr(m, first))
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        m.replace(nope=1)
    with pytest.raises(TypeError, match="nope"):
        cls(*values, nope=1)


def test_replace_changes_one_field_and_checks_it() -> None:
    line = examples()["DealBeneficiary"]
    more = line.replace(amount="20")
    assert more.amount == Decimal("20")
    assert line.amount == Decimal("10.50")
    assert more != line
    assert (more.beneficiary_id, more.pay_reason) == (line.beneficiary_id, line.pay_reason)
    with pytest.raises(fxpay.InvalidRequestError, match="greater than zero"):
        line.replace(amount=0)
    with pytest.raises(TypeError, match="beneficiary_id"):
        line.replace(beneficiary_id=7)
    token = examples()["Token"]
    later = token.replace(expires_at=WHEN + dt.timedelta(hours=1))
    assert later.expires_at - token.expires_at == dt.timedelta(hours=1)
    assert later.access_token == token.access_token


def test_pattern_matching() -> None:
    match examples()["Quote"]:
        case fxpay.Quote(_, "USD", amount, "AUD", freebies=fxpay.Freebies(total=total)):
            assert amount == Decimal("1000.00")
            assert total == 3
        case _:
            pytest.fail("the quote did not match")
    match examples()["DealCreated"]:
        case fxpay.DealCreated("fail", errors=[fxpay.FieldError(code)]):
            assert code == "a:b:1"
        case _:
            pytest.fail("the event did not match")


@pytest.mark.parametrize("name", sorted(examples()))
def test_a_wrong_type_names_the_field(name: str) -> None:
    m = examples()[name]
    cls = type(m)
    for field in cls.__match_args__:
        kwargs = {f: getattr(m, f) for f in cls.__match_args__}
        kwargs[field] = object()
        # An amount field follows the one rule of every amount (test_validation): a wrong
        # type is a TypeError naming the field, like any other field's.
        with pytest.raises(TypeError, match=field):
            cls(**kwargs)
    with pytest.raises(TypeError, match=f"missing required argument '{cls.__match_args__[0]}'"):
        cls()


def test_equal_amounts_hash_alike() -> None:
    assert fxpay.Freebies(1, "2.0", Decimal("3.00")) == fxpay.Freebies("1.0", 2, 3)
    assert hash(fxpay.Freebies(1, "2.0", Decimal("3.00"))) == hash(fxpay.Freebies("1.0", 2, 3))
    assert fxpay.Freebies(1, 2, 3) != fxpay.Freebies(1, 2, 4)


def test_money_is_exact_and_counts_too() -> None:
    q = examples()["Quote"]
    assert type(q.buy_amount) is Decimal
    assert str(q.buy_amount) == "1000.00"
    assert str(q.customer_rate) == "1.523450"
    assert q.to_dict()["buyAmount"] == Decimal("1000.00")
    assert type(q.to_dict()["fee"]) is Decimal
    assert fxpay.DealBeneficiary(UUID, 0.1, "r", "x").amount == Decimal("0.1")
    with pytest.raises(fxpay.InvalidRequestError):
        fxpay.Quote(UUID, "USD", float("nan"), "AUD", "1", "1", "1")
    assert fxpay.Quote(UUID, "USD", 1, "AUD", 2, 3, 4).fee is None  # optional fields default to None


def test_reprs_hold_no_secrets() -> None:
    for m in examples().values():
        for shown in (repr(m), str(m), m._repr_html_()):
            assert "SECRET" not in shown, shown
    assert repr(examples()["Address"]).startswith("Address(address_line='1 George St'")
    assert "<th style='text-align:left'>country</th><td>AU</td>" in examples()["Address"]._repr_html_()


def test_to_dict_is_the_wire_form() -> None:
    b = examples()["Beneficiary"].to_dict()
    assert b["beneficiaryBankDetails"]["bankAddress"]["postCode"] == "2000"
    assert b["beneficiaryAddress"]["country"] == "AU"
    assert examples()["Deal"].to_dict()["beneficiaries"][0] == {
        "beneficiaryId": UUID,
        "amount": Decimal("10.50"),
        "payReason": "Invoice",
        "payReference": "INV-1",
    }
    token = examples()["Token"]
    assert fxpay.Token.from_dict(token.to_dict()) == token
    auth = examples()["AuthorizationRequest"]
    assert auth.to_dict()["code_verifier"] == "VERIFIER-SECRET"
    assert fxpay.AuthorizationRequest(**auth.to_dict()) == auth


def test_token_expiry_is_an_aware_datetime() -> None:
    t = fxpay.Token.from_dict({"access_token": "a", "expires_in": 60, "expires_at": "2030-01-02T03:04:05"})
    assert t.expires_at == WHEN
    assert t.expires_at.tzinfo is not None
    assert not t.expired
    assert fxpay.Token.from_dict({"access_token": "a", "expires_at": 0}).expired
    with pytest.raises(TypeError, match="mapping"):
        fxpay.Token.from_dict("a")  # type: ignore[arg-type]


UNIX_2030 = 1893456000  # 2030-01-01T00:00:00Z


@pytest.mark.parametrize(
    ("saved", "expires_in", "expires_at"),
    [
        ({"expires_in": 60, "expires_at": UNIX_2030}, 60, dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)),
        ({"expires_in": 60, "expires_at": UNIX_2030 + 0.5}, 60, dt.datetime(2030, 1, 1, 0, 0, 0, 500000, tzinfo=dt.timezone.utc)),
        ({"expires_in": 60, "expires_at": "2030-01-02T03:04:05+00:00"}, 60, WHEN),
        ({"expires_in": 60, "expires_at": WHEN}, 60, WHEN),
        # A float count of seconds is taken whole.
        ({"expires_in": 59.9, "expires_at": WHEN}, 59, WHEN),
    ],
    ids=["unix-int", "unix-float", "iso-text", "datetime", "float-expires-in"],
)
def test_token_from_dict_reads_each_spelling_of_the_expiry(saved: dict[str, Any], expires_in: int, expires_at: dt.datetime) -> None:
    t = fxpay.Token.from_dict({"access_token": "a", **saved})
    assert (t.expires_in, t.expires_at) == (expires_in, expires_at)
    assert type(t.expires_in) is int


@pytest.mark.parametrize("missing", [{}, {"expires_at": None}], ids=["absent", "none"])
def test_token_from_dict_without_an_expiry_counts_expires_in_from_now(missing: dict[str, Any]) -> None:
    before = dt.datetime.now(dt.timezone.utc)
    t = fxpay.Token.from_dict({"access_token": "a", "expires_in": 3599.7, **missing})
    after = dt.datetime.now(dt.timezone.utc)
    assert t.expires_in == 3599
    assert before + dt.timedelta(seconds=3599) <= t.expires_at <= after + dt.timedelta(seconds=3599)


@pytest.mark.parametrize(
    ("saved", "error", "match"),
    [
        ({"expires_in": float("inf")}, fxpay.InvalidRequestError, "expires_in is inf"),
        ({"expires_in": 60, "expires_at": float("nan")}, fxpay.InvalidRequestError, "expires_at is NaN"),
        ({"expires_in": 60, "expires_at": "not a date"}, fxpay.InvalidRequestError, "not a date"),
        # The constructor's message: from_dict takes what Token() takes, and a few spellings more.
        ({"expires_in": "60"}, TypeError, "^expires_in must be an int, not str$"),
        ({"expires_in": 60, "expires_at": True}, TypeError, "^expires_at must be unix seconds, ISO 8601 text or a datetime, not bool$"),
        ({"expires_in": 60, "expires_at": [1]}, TypeError, "must be a datetime, not list"),
    ],
    ids=["infinite-expires-in", "nan-expires-at", "bad-text", "str-expires-in", "bool", "list"],
)
def test_token_from_dict_refuses_an_expiry_it_cannot_read(saved: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        fxpay.Token.from_dict({"access_token": "a", **saved})


def test_a_field_is_made_on_its_first_read_and_every_read_returns_that_object() -> None:
    """A field's Python value is made once and kept: two reads, or eight threads racing the
    first read of a fresh model, all get one object (the value is made outside the cell's
    lock, so the first made is the one kept)."""

    def quote() -> fxpay.Quote:
        return fxpay.Quote(UUID, "USD", "1.50", "AUD", 2, 3, 4, fee="0.10", freebies=fxpay.Freebies(3, 1, 2))

    q = quote()
    for name in ("buy_amount", "id", "fee", "freebies", "customer_rate"):
        assert getattr(q, name) is getattr(q, name), name
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(100):
            m = quote()
            start = threading.Barrier(8)
            seen: list[object] = []

            def read(m: fxpay.Quote = m, start: threading.Barrier = start, seen: list[object] = seen) -> None:
                start.wait()
                seen.append(m.freebies)
                seen.append(m.sell_amount)

            threads = [threading.Thread(target=read) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(seen) == 16
            assert len({id(v) for v in seen}) == 2, "a field read by racing threads gave more than one object"
    finally:
        sys.setswitchinterval(old)


def test_a_models_fields_are_read_only_descriptors_that_show_their_class_and_name() -> None:
    """What ``Quote.buy_amount`` shows in a REPL and in ``help(fxpay.Quote)``."""
    field = vars(fxpay.Quote)["buy_amount"]
    assert fxpay.Quote.buy_amount is field  # read on the class: the descriptor itself
    assert repr(field) == "<field Quote.buy_amount>"
    assert repr(vars(fxpay.Token)["expires_at"]) == "<field Token.expires_at>"
    q = fxpay.Quote(UUID, "USD", 1, "AUD", 2, 3, 4)
    with pytest.raises(AttributeError, match=r"^Quote is immutable: make a changed copy with \.replace\(buy_amount=\.\.\.\)$"):
        q.buy_amount = Decimal(2)  # type: ignore[misc]
    with pytest.raises(AttributeError, match=r"^Quote is immutable$"):
        del q.buy_amount  # type: ignore[misc]


def test_help_shows_each_field_with_its_own_line() -> None:
    """``help(fxpay.Quote)`` lists every field under "Data descriptors" with its own text, not
    one shared docstring of the descriptor's class."""
    import pydoc

    assert vars(fxpay.Quote)["buy_amount"].__doc__ == "The field buy_amount of Quote."
    assert vars(fxpay.Deal)["quote_id"].__doc__ == "The field quote_id of Deal."
    text = pydoc.render_doc(fxpay.Quote, renderer=pydoc.plaintext)
    for name in ("buy_amount", "sell_currency", "customer_rate"):
        assert f" |  {name}\n |      The field {name} of Quote.\n" in text, name


def test_field_error_parts() -> None:
    e = examples()["FieldError"]
    assert (e.layer, e.component, e.number) == ("validation", "beneficiary", 1004)
    assert fxpay.FieldError("odd", None, "m").layer is None


def test_virtual_account_is_a_read_only_mapping() -> None:
    va = fxpay.VirtualAccount({"id": "va1", "currency": "USD", "balance": Decimal("1.50"), "tags": ["a"]})
    assert issubclass(fxpay.VirtualAccount, collections.abc.Mapping)
    assert va["currency"] == "USD"
    assert va.get("nope") is None
    assert va.get("nope", 1) == 1
    assert list(va) == list(va.keys()) == ["id", "currency", "balance", "tags"]
    assert len(va) == 4
    assert "id" in va
    assert dict(va.items())["balance"] == Decimal("1.50")
    assert va.raw == dict(va) == va.to_dict()
    assert pickle.loads(pickle.dumps(va)) == va
    assert hash(pickle.loads(pickle.dumps(va))) == hash(va)
    assert fxpay.VirtualAccount({"currency": "USD", "id": "va1", "tags": ["a"], "balance": Decimal("1.50")}) == va
    with pytest.raises(KeyError):
        va["nope"]
    with pytest.raises(TypeError):
        va["id"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError, match="data"):
        fxpay.VirtualAccount({"x": object()})


def test_models_read_from_the_service(fxpay_client: fxpay.Client) -> None:
    q = fxpay_client.get_quote(fxpay_client.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="AUD"))
    raw = q.raw
    assert q.raw == raw
    assert raw["buyAmount"] == q.buy_amount
    assert raw["id"] == q.id
    back = pickle.loads(pickle.dumps(q))
    assert back == q
    assert back.raw == raw
    # A copy made by hand has no answer to keep.
    assert q.replace().raw == {}
    assert q.replace() == q


class _Keep:
    """A token store that keeps what the client saves."""

    def __init__(self) -> None:
        self.saved: list[fxpay.Token] = []

    def load(self, key: str) -> fxpay.Token | None:
        return None

    def save(self, key: str, token: fxpay.Token) -> None:
        self.saved.append(token)


def test_a_saved_token_equals_the_one_it_was_saved_from(fxpay_sandbox: Any) -> None:
    # The core's expiry has sub-microsecond digits; a datetime (and so a store) keeps
    # microseconds: the token read back still equals the one saved.
    store = _Keep()
    with fxpay.Client(fxpay_sandbox.client_id, fxpay_sandbox.client_secret, base_url=fxpay_sandbox.base_url, token_store=store) as c:
        c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="AUD")
    [token] = store.saved
    again = fxpay.Token.from_dict(json.loads(json.dumps(token.to_dict())))
    assert again == token
    assert hash(again) == hash(token)


def test_raw_is_a_new_dict_each_time_and_changing_it_changes_nothing(fxpay_client: fxpay.Client) -> None:
    # Issue 23 item 3: raw was one shared dict, so edits persisted and could contradict the
    # typed fields. Each access is now a new dict made from JSON the model keeps to itself.
    q = fxpay_client.get_quote(fxpay_client.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="AUD"))
    first = q.raw
    first["buyAmount"] = Decimal("999")
    first["injected"] = True
    first["freebies"]["total"] = -1
    del first["id"]
    again = q.raw
    assert again is not first
    assert again["buyAmount"] == q.buy_amount == Decimal("10.00")
    assert "injected" not in again
    assert again["id"] == q.id
    assert again["freebies"]["total"] == q.freebies.total
    # A pickle carries the untouched JSON too.
    assert pickle.loads(pickle.dumps(q)).raw == again
    va = fxpay.VirtualAccount({"id": "va1", "tags": ["a"], "balance": {"amount": Decimal("1.50")}})
    va.raw["tags"].append("b")
    va["tags"].append("c")
    va["balance"]["amount"] = 0
    va.to_dict()["balance"]["amount"] = 0
    assert va.raw == {"id": "va1", "tags": ["a"], "balance": {"amount": Decimal("1.50")}}
    assert va["tags"] == ["a"]


def test_setstate_validates_like_the_constructor() -> None:
    q = examples()["Quote"]
    cls, args, state = q.__reduce__()
    assert state == {}
    # What unpickling does: the class with the fields, then __setstate__ with raw.
    fresh = cls(*args)
    with pytest.raises(TypeError, match="must be a dict, not int"):
        fresh.__setstate__(5)
    with pytest.raises(TypeError, match="must be a dict, not list"):
        fresh.__setstate__([("id", "x")])
    with pytest.raises(TypeError, match=r'Quote.raw\["x"\]'):
        fresh.__setstate__({"x": object()})
    with pytest.raises(TypeError, match="str keys"):
        fresh.__setstate__({1: "x"})
    fresh.__setstate__({"id": "x", "n": Decimal("1.5")})
    assert fresh.raw == {"id": "x", "n": Decimal("1.5")}
    # Once raw is fixed, a second call (or one on a model read from JSON) changes nothing.
    with pytest.raises(TypeError, match="immutable"):
        fresh.__setstate__({"id": "y"})
    assert fresh.raw == {"id": "x", "n": Decimal("1.5")}
    built = cls(*args)
    assert built.raw == {}
    with pytest.raises(TypeError, match="immutable"):
        built.__setstate__({"id": "y"})
    # Fields of a wrong type in a pickle are the constructor's TypeError.
    bad = list(args)
    bad[0] = 7
    with pytest.raises(TypeError, match=r"Quote\.id"):
        pickle.loads(pickle.dumps(_Reduced(cls, tuple(bad), {})))
    with pytest.raises(TypeError, match="must be a dict"):
        pickle.loads(pickle.dumps(_Reduced(cls, args, "not a dict")))


class _Reduced:
    """Pickles as the given reduce tuple: a hand-made (or tampered) pickle of a model."""

    def __init__(self, cls: Any, args: tuple[Any, ...], state: Any) -> None:
        self.reduced = (cls, args, state)

    def __reduce__(self) -> tuple[Any, ...]:
        return self.reduced
