"""The exception classes of ``fxpay.errors`` as plain Python exceptions: their message, ``args``
and attributes, and a pickle round trip that keeps every attribute."""

from __future__ import annotations

import pickle

import pytest

import fxpay
from fxpay.errors import ApiError, FxPayError, OAuthError, RateLimitError


def test_message_is_str_and_args() -> None:
    e = FxPayError("boom", "extra")
    assert str(e) == "boom"
    assert e.message == "boom"
    assert e.args == ("boom", "extra")
    assert str(FxPayError()) == ""
    assert FxPayError().args == ("",)


def test_a_subclass_pickles_with_its_message_and_args() -> None:
    e = fxpay.InvalidRequestError("amount must be positive")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is fxpay.InvalidRequestError
    assert back.args == ("amount must be positive",)
    assert str(back) == "amount must be positive"


def test_oauth_error_keeps_its_fields_through_pickle() -> None:
    e = OAuthError("token refused", error="invalid_grant", error_description="code used", status=400)
    assert str(e) == "token refused"
    assert e.args == ("token refused",)
    assert (e.message, e.error, e.error_description, e.status) == ("token refused", "invalid_grant", "code used", 400)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is OAuthError
    assert (back.message, back.error, back.error_description, back.status) == ("token refused", "invalid_grant", "code used", 400)
    assert str(back) == "token refused"


def test_api_error_keeps_its_fields_through_pickle() -> None:
    field = fxpay.FieldError("invalid", "buyAmount", "must be positive")
    e = RateLimitError("slow down", status=429, errors=[field], body='{"errors": []}', retry_after=7)
    assert str(e) == "slow down"
    assert e.args == ("slow down",)
    assert (e.status, e.errors, e.body, e.retry_after) == (429, [field], '{"errors": []}', 7)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is RateLimitError
    assert (back.message, back.status, back.errors, back.body, back.retry_after) == ("slow down", 429, [field], '{"errors": []}', 7)


def test_api_error_errors_is_a_new_list() -> None:
    given = [fxpay.FieldError("invalid", None, "bad")]
    e = ApiError("m", status=400, errors=given)
    assert e.errors == given
    assert e.errors is not given
    assert ApiError("m").errors == []
    assert (ApiError("m").status, ApiError("m").body, ApiError("m").retry_after) == (0, None, None)


def test_a_journal_refusal_keeps_its_message_and_entry_through_pickle() -> None:
    # A Celery task that hits KeyReusedError sends it to its result backend pickled: the
    # message and the key's journal entry must survive the trip.
    from fxpay.testing import Sandbox

    with Sandbox() as sb, sb.client(journal=fxpay.MemoryJournal()) as c:
        c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="AUD", idempotency_key="k")
        with pytest.raises(fxpay.KeyReusedError) as info:
            c.create_quote(buy_currency="USD", buy_amount="11", sell_currency="AUD", idempotency_key="k")
    refused = info.value
    assert isinstance(refused, fxpay.IdempotencyError)
    assert str(refused) == refused.message
    assert refused.message.startswith('idempotency key "k" was used for another request')
    assert refused.entry is not None
    assert (refused.entry.key, refused.entry.operation, refused.entry.state) == ("k", "create_quote", "done")
    back = pickle.loads(pickle.dumps(refused))
    assert type(back) is fxpay.KeyReusedError
    assert (str(back), back.message) == (str(refused), refused.message)
    assert back.entry is not None
    assert back.entry.to_json() == refused.entry.to_json()
    plain = fxpay.JournalError("the journal is read-only")
    assert (str(plain), plain.entry) == ("the journal is read-only", None)
