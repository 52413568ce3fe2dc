"""Issue 54 items 5, 6, 7 and 17: errors a person reads. A token-endpoint failure is an
``ApiError`` (``invalid_client`` also an ``AuthenticationError``); an
``OutcomeUnknownError`` says "nothing was sent" only on a repeat that sent nothing, and on
the call that sent its request names it and carries its answer's request id; a timeout
names the whole path, the limit and the attempts made; a token answer whose
``token_type`` is not ``Bearer`` is refused. Against the embedded sandbox over loopback, or
a crafted loopback server for answers the sandbox never gives."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

import fxpay
from fxpay.testing import Cassette, Sandbox

from conftest import login
from crafted_support import TOKEN_PATH, Crafted

QUOTE_PATH = "GET /v1/payments/quotes/*"


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


@pytest.fixture
def crafted() -> Iterator[Crafted]:
    s = Crafted()
    yield s
    s.close()


def answers(path: Path, status: int) -> list[dict[str, object]]:
    recorded = json.loads(path.read_text())
    return [x["response"] for x in recorded["interactions"] if x["response"] and x["response"]["status"] == status]


# -- item 5: a token-endpoint failure is an ApiError ---------------------------------------------


def test_wrong_credentials_are_caught_as_an_api_error_and_an_authentication_error(sb: Sandbox, tmp_path: Path) -> None:
    path = tmp_path / "cassette.json"
    with (
        fxpay.Client(sb.client_id, "not-the-secret", base_url=sb.base_url, cassette=Cassette(path, mode="record")) as c,
        pytest.raises(fxpay.ApiError) as caught,
    ):
        c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    e = caught.value
    assert isinstance(e, fxpay.OAuthError)
    assert isinstance(e, fxpay.AuthenticationError)
    assert e.error == "invalid_client"
    (sent,) = answers(path, 401)
    assert e.status == 401
    assert json.loads(e.body or "") == sent["body"]  # the cassette keeps a JSON body parsed
    assert json.loads(e.body or "")["error"] == "invalid_client"
    assert e.request_id == sent["headers"]["x-request-id"]  # type: ignore[index]
    assert e.headers["Content-Type"].startswith("application/json")
    assert e.errors == []
    assert "not-the-secret" not in str(e) + repr(e) + (e.body or "")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e)
    assert (back.status, back.body, back.request_id, back.error, str(back)) == (e.status, e.body, e.request_id, e.error, str(e))


def test_another_token_error_is_an_api_error_but_no_authentication_error(sb: Sandbox) -> None:
    with sb.client() as c:
        auth, callback = login(sb, c)
        c.exchange_code(auth, callback)
        with pytest.raises(fxpay.ApiError) as caught:
            c.exchange_code(auth, callback)  # the code was redeemed
    e = caught.value
    assert isinstance(e, fxpay.OAuthError)
    assert not isinstance(e, fxpay.AuthenticationError)
    assert (e.error, e.status) == ("invalid_grant", 400)
    assert json.loads(e.body or "")["error"] == "invalid_grant"
    assert type(pickle.loads(pickle.dumps(e))) is type(e)


def test_a_callback_error_is_an_oauth_error_without_an_answer() -> None:
    e = fxpay.OAuthError("access_denied", error="access_denied")
    assert isinstance(e, fxpay.ApiError)
    assert (e.status, e.body, e.request_id, dict(e.headers), e.errors) == (None, None, None, {}, [])
    assert not isinstance(e, fxpay.AuthenticationError)


# -- item 6: OutcomeUnknownError tells the truth -------------------------------------------------


def test_the_call_that_sent_names_its_request_and_its_answer(sb: Sandbox, tmp_path: Path) -> None:
    path = tmp_path / "cassette.json"
    journal = fxpay.SqliteJournal(tmp_path / "journal.db")
    kwargs = {"buy_currency": "USD", "buy_amount": "100", "sell_currency": "AUD", "idempotency_key": "k1"}
    with sb.client(journal=journal, max_retries=0, cassette=Cassette(path, mode="record")) as c:
        sb.fail_next("POST /v1/payments/quotes", 503)
        with pytest.raises(fxpay.OutcomeUnknownError) as sent:
            c.create_quote(**kwargs)  # type: ignore[arg-type]
        with pytest.raises(fxpay.OutcomeUnknownError) as repeat:
            c.create_quote(**kwargs)  # type: ignore[arg-type]
    (answer,) = answers(path, 503)
    rid = answer["headers"]["x-request-id"]  # type: ignore[index]
    text = str(sent.value)
    assert "POST /v1/payments/quotes" in text, text
    assert "nothing was sent" not in text.lower(), text
    assert "was sent" in text, text
    assert sent.value.request_id == rid
    assert isinstance(sent.value.__cause__, fxpay.ServerError)
    # The repeat sent nothing, and says so.
    assert "nothing was sent" in str(repeat.value).lower(), str(repeat.value)
    assert len(answers(path, 503)) == 1


def test_a_lost_answer_without_a_request_id_still_names_the_request(sb: Sandbox, tmp_path: Path) -> None:
    journal = fxpay.SqliteJournal(tmp_path / "journal.db")
    with sb.client(journal=journal, timeout=0.3) as c:
        sb.delay_next("POST /v1/payments/quotes", 3)
        with pytest.raises(fxpay.OutcomeUnknownError) as sent:
            c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key="k2")
    text = str(sent.value)
    assert "POST /v1/payments/quotes" in text, text
    assert "nothing was sent" not in text.lower(), text
    assert sent.value.request_id is None
    assert isinstance(sent.value.__cause__, fxpay.TimeoutError)


# -- item 7: a timeout says what happened --------------------------------------------------------


def test_a_timeout_names_the_whole_path_the_limit_and_the_attempts(sb: Sandbox) -> None:
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        sb.delay_next(QUOTE_PATH, 3)
        sb.delay_next(QUOTE_PATH, 3)
        with pytest.raises(fxpay.TimeoutError) as caught:
            c.with_options(timeout=0.3, max_retries=1).get_quote(qid)
        text = str(caught.value)
        assert f"GET /v1/payments/quotes/{qid}" in text, text
        assert "the client's timeout of 0.300 s" in text, text
        assert "2 attempts" in text, text
        sb.delay_next(QUOTE_PATH, 3)
        with pytest.raises(fxpay.TimeoutError) as once:
            c.with_options(timeout=0.3, max_retries=0).get_quote(qid)
        assert "1 attempt" in str(once.value), str(once.value)


def test_a_deadline_before_sending_names_the_whole_path(sb: Sandbox) -> None:
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        sb.fail_next(QUOTE_PATH, 503)
        sb.delay_next(QUOTE_PATH, 3)
        with pytest.raises(fxpay.TimeoutError) as caught:
            c.with_options(deadline=0.5).get_quote(qid)
    text = str(caught.value)
    assert f"GET /v1/payments/quotes/{qid}" in text, text
    assert "deadline of 0.500 s" in text, text


# -- item 17: a token type other than Bearer is refused ------------------------------------------


@pytest.mark.parametrize("kind", ["mac", "DPoP", "N_A"])
def test_a_token_that_is_not_bearer_is_an_oauth_error(crafted: Crafted, kind: str) -> None:
    crafted.set(TOKEN_PATH, {"access_token": "AT", "token_type": kind, "expires_in": 3600})
    with fxpay.Client("cid", "secret", base_url=crafted.base_url, max_retries=0) as c, pytest.raises(fxpay.OAuthError) as caught:
        c.get_quote("3f2b6a1e-9c1d-4d7a-8b0e-2f6f1c2d3e4f")
    e = caught.value
    assert kind in str(e), str(e)
    assert "Bearer" in str(e), str(e)
    assert e.status == 200
    # Nothing was sent with a token of a type fxpay does not understand (RFC 6749 section 7.1).
    assert [p for _, p in crafted.requests] == [TOKEN_PATH]


@pytest.mark.parametrize("kind", ["Bearer", "bearer", "BEARER"])
def test_bearer_in_any_case_is_a_bearer_token(crafted: Crafted, kind: str) -> None:
    crafted.set(TOKEN_PATH, {"access_token": "AT", "token_type": kind, "expires_in": 3600})
    crafted.set("/v1/payments/quotes", {"id": "3f2b6a1e-9c1d-4d7a-8b0e-2f6f1c2d3e4f"})
    with fxpay.Client("cid", "secret", base_url=crafted.base_url, max_retries=0) as c:
        assert c.create_quote(buy_currency="USD", buy_amount="1", sell_currency="AUD")
    (_, _, headers) = crafted.received[-1]
    assert headers["authorization"] == "Bearer AT"
