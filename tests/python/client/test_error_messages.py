"""Issue 46 items 7 and 8: errors that say what happened. An ``OAuthError`` from the token
endpoint carries the answer's ``request_id`` and ``headers``; ``str()`` of an ``ApiError`` or
``OAuthError`` names the request id, so a traceback in a log has it; a ``TimeoutError`` names
the request and the limit that ran out; an answer raised at once because its
``Retry-After`` would end past the deadline says that the deadline cut the retries. Against
the embedded sandbox over loopback."""

from __future__ import annotations

import json
import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import fxpay
from fxpay.testing import Cassette, Sandbox

from conftest import login

QUOTE_PATH = "GET /v1/payments/quotes/*"


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


def sent_ids(path: Path, status: int) -> list[str]:
    """The ``x-request-id`` of each recorded answer with ``status``, as the sandbox sent it."""
    recorded = json.loads(path.read_text())
    answers = [x["response"] for x in recorded["interactions"] if x["response"]]
    return [r["headers"]["x-request-id"] for r in answers if r["status"] == status]


def test_an_oauth_error_of_the_token_endpoint_has_the_request_id_it_sent(sb: Sandbox, tmp_path: Path) -> None:
    path = tmp_path / "cassette.json"
    with (
        fxpay.Client(sb.client_id, "not-the-secret", base_url=sb.base_url, cassette=Cassette(path, mode="record")) as c,
        pytest.raises(fxpay.OAuthError) as caught,
    ):
        c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    e = caught.value
    (sent,) = sent_ids(path, 401)
    assert e.request_id == sent
    uuid.UUID(sent)
    assert e.headers["X-Request-Id"] == sent
    assert e.headers["content-type"].startswith("application/json")
    assert e.error == "invalid_client"
    # The id is in the text a log shows, and survives a pickle (a Celery task's failure).
    assert sent in str(e)
    assert str(e) == f"{e.message} (request id {sent})"
    back = pickle.loads(pickle.dumps(e))
    assert (back.request_id, back.error, back.status, str(back)) == (sent, e.error, e.status, str(e))


def test_an_oauth_error_of_a_code_grant_has_the_request_id(sb: Sandbox) -> None:
    with sb.client() as c:
        auth, callback = login(sb, c)
        c.exchange_code(auth, callback)
        # The code was redeemed: the second exchange is refused by the token endpoint.
        with pytest.raises(fxpay.OAuthError) as caught:
            c.exchange_code(auth, callback)
    e = caught.value
    assert e.error == "invalid_grant"
    assert e.request_id is not None
    uuid.UUID(e.request_id)
    assert e.request_id in str(e)


def test_a_callback_error_has_no_request_id_and_empty_headers() -> None:
    e = fxpay.OAuthError("access_denied", error="access_denied")
    assert (e.request_id, dict(e.headers), str(e)) == (None, {}, "access_denied")


def test_str_of_an_api_error_names_its_request_id(sb: Sandbox, tmp_path: Path) -> None:
    path = tmp_path / "cassette.json"
    with (
        fxpay.Client(sb.client_id, sb.client_secret, base_url=sb.base_url, cassette=Cassette(path, mode="record")) as c,
        pytest.raises(fxpay.NotFoundError) as caught,
    ):
        c.get_quote("no-such-quote")
    (sent,) = sent_ids(path, 404)
    assert caught.value.request_id == sent
    assert f"(request id {sent})" in str(caught.value)
    # An error made by hand names the id of the headers it is given, once.
    e = fxpay.ServerError("HTTP 503", status=503, headers={"x-request-id": "abc"})
    assert str(e) == "HTTP 503 (request id abc)"
    assert str(fxpay.ServerError("HTTP 503 (request id abc)", status=503, headers={"x-request-id": "abc"})) == "HTTP 503 (request id abc)"
    assert str(fxpay.ServerError("HTTP 503", status=503)) == "HTTP 503"


def test_a_timeout_names_the_request_and_the_client_timeout(sb: Sandbox) -> None:
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        sb.delay_next(QUOTE_PATH, 3)
        with pytest.raises(fxpay.TimeoutError) as caught:
            c.with_options(timeout=0.3, max_retries=0).get_quote(qid)
    text = str(caught.value)
    assert f"GET /v1/payments/quotes/{qid}" in text, text
    assert "the client's timeout of 0.300 s" in text, text


def test_a_timeout_names_the_request_and_the_deadline(sb: Sandbox) -> None:
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        sb.delay_next(QUOTE_PATH, 3)
        with pytest.raises(fxpay.TimeoutError) as caught:
            c.with_options(deadline=0.4).get_quote(qid)
    text = str(caught.value)
    assert f"GET /v1/payments/quotes/{qid}" in text, text
    assert "the call's deadline of 0.400 s" in text, text
    assert "client's timeout" not in text, text


def test_an_answer_raised_at_once_says_the_deadline_cut_its_retries(sb: Sandbox) -> None:
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        sb.fail_next(QUOTE_PATH, 503, retry_after=10)
        with pytest.raises(fxpay.ServerError) as caught:
            c.with_options(deadline=2).get_quote(qid)
        text = str(caught.value)
        assert "not retried after 1 attempt" in text, text
        assert "would end past the call's deadline of 2.000 s" in text, text
        assert "10.000 s" in text, text
        # A 503 not retried because the retries ran out carries no such note.
        sb.fail_next(QUOTE_PATH, 503)
        with pytest.raises(fxpay.ServerError) as plain:
            c.with_options(max_retries=0).get_quote(qid)
        assert "deadline" not in str(plain.value), str(plain.value)
