"""The https sandbox offers HTTP/2 by ALPN besides HTTP/1.1; plain http stays HTTP/1.1 only."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator

import httpx
import pytest

import fxpay

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def sb() -> Iterator[fxpay.testing.Sandbox]:
    with fxpay.testing.Sandbox(tls=True) as s:
        yield s


def _token(c: httpx.Client, sb: fxpay.testing.Sandbox) -> str:
    form = {"grant_type": "client_credentials", "client_id": sb.client_id, "client_secret": sb.client_secret, "scope": "payments"}
    r = c.post(f"{sb.base_url}/v1/oauth/token", data=form)
    assert r.status_code == 200, r.text
    return str(r.json()["access_token"])


def test_https_answers_over_http2_when_the_client_offers_it(sb: fxpay.testing.Sandbox) -> None:
    assert sb.ca_bundle is not None
    with sb.client() as fx:
        qid = fx.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
    with httpx.Client(http2=True, verify=ssl.create_default_context(cafile=sb.ca_bundle)) as c:
        token = _token(c, sb)
        r = c.get(f"{sb.base_url}/v1/payments/quotes/{qid}", headers={"Authorization": f"Bearer {token}"})
        assert r.http_version == "HTTP/2"
        assert r.status_code == 200
        assert r.json()["id"] == qid
        # An error answer over HTTP/2 too (the error envelope, not a reset stream).
        r = c.get(f"{sb.base_url}/v1/payments/quotes/nope", headers={"Authorization": f"Bearer {token}"})
        assert r.http_version == "HTTP/2"
        assert r.status_code == 404
        assert "errors" in r.json()


def test_many_streams_on_one_http2_connection(sb: fxpay.testing.Sandbox) -> None:
    assert sb.ca_bundle is not None
    with sb.client() as fx:
        qid = fx.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
    before = sb.stats()

    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(http2=True, verify=ssl.create_default_context(cafile=sb.ca_bundle)) as c:
            form = {"grant_type": "client_credentials", "client_id": sb.client_id, "client_secret": sb.client_secret, "scope": "payments"}
            r = await c.post(f"{sb.base_url}/v1/oauth/token", data=form)
            headers = {"Authorization": f"Bearer {r.json()['access_token']}"}
            return await asyncio.gather(*(c.get(f"{sb.base_url}/v1/payments/quotes/{qid}", headers=headers) for _ in range(50)))

    answers = asyncio.run(main())
    assert {(r.http_version, r.status_code) for r in answers} == {("HTTP/2", 200)}
    # 51 requests over one connection.
    after = sb.stats()
    assert after["requests"] - before["requests"] == 51
    assert after["connections"] - before["connections"] == 1


def test_an_http1_client_still_gets_http1_over_tls(sb: fxpay.testing.Sandbox) -> None:
    assert sb.ca_bundle is not None
    with httpx.Client(verify=ssl.create_default_context(cafile=sb.ca_bundle)) as c:
        r = c.get(f"{sb.base_url}/openapi.json")
        assert r.http_version == "HTTP/1.1"
        assert r.status_code == 200


def test_plain_http_stays_http1_only() -> None:
    with fxpay.testing.Sandbox() as s:
        # h2 with prior knowledge on plain http is refused: the plain listener speaks HTTP/1.1 only.
        with httpx.Client(http1=False, http2=True) as c, pytest.raises(httpx.HTTPError):
            c.get(f"{s.base_url}/openapi.json")
        with httpx.Client() as c:
            r = c.get(f"{s.base_url}/openapi.json")
            assert r.http_version == "HTTP/1.1"
            assert r.status_code == 200


def test_fxpay_works_over_https_with_http2(sb: fxpay.testing.Sandbox) -> None:
    # fxpay (reqwest) offers h2 by ALPN: every call, blocking and awaited, works on it.
    with sb.client() as fx:
        qid = fx.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
        for _ in range(20):
            assert fx.get_quote(qid).id == qid

        async def main() -> None:
            got = await asyncio.gather(*(fx.get_quote_async(qid) for _ in range(40)))
            assert {q.id for q in got} == {qid}

        asyncio.run(main())


def test_alpn_setting_offers_only_http1(monkeypatch: pytest.MonkeyPatch) -> None:
    # FXPAY_SANDBOX_ALPN=http/1.1 (the benchmark's "TLS http/1.1" sandbox): a client that
    # offers h2 gets HTTP/1.1, and fxpay works on it.
    monkeypatch.setenv("FXPAY_SANDBOX_ALPN", "http/1.1")
    with fxpay.testing.Sandbox(tls=True) as s:
        assert s.ca_bundle is not None
        with httpx.Client(http2=True, verify=ssl.create_default_context(cafile=s.ca_bundle)) as c:
            r = c.get(f"{s.base_url}/openapi.json")
            assert r.http_version == "HTTP/1.1"
            assert r.status_code == 200
        with s.client() as fx:
            qid = fx.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
            assert fx.get_quote(qid).id == qid
