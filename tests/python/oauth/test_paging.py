"""Issue 30 item 4: every page of ``list_virtual_accounts``. The sandbox pages its accounts
(``set_virtual_accounts(count, page_size=)``); the session follows ``next`` to the end. A
hand-made server on loopback answers a looping ``next``, a ``next`` on another origin and a
cursor fxpay cannot follow: each is a ``fxpay.PaginationError``, never a short list."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import fxpay
from fxpay.testing import RemoteSandbox, Sandbox


def session_of(sb: Any, c: fxpay.Client) -> fxpay.UserSession:
    auth = c.authorization_url(sb.redirect_uri)
    return c.user_session(c.exchange_code(auth, sb.approve(auth.url)))


def test_250_accounts_in_pages_of_40_come_back_whole_in_7_requests() -> None:
    with Sandbox() as sb, sb.client() as c:
        sb.set_virtual_accounts(250, page_size=40)
        s = session_of(sb, c)
        before = sb.stats()["paths"].get("GET /v1/gca/virtual-accounts", 0)
        accounts = s.list_virtual_accounts()
        fetched = sb.stats()["paths"]["GET /v1/gca/virtual-accounts"] - before
        assert len(accounts) == 250
        assert len({a["id"] for a in accounts}) == 250
        assert fetched == 7
        # The async twin gets the same.
        import asyncio

        again = asyncio.run(s.list_virtual_accounts_async())
        assert [a["id"] for a in again] == [a["id"] for a in accounts]
        # One page when there is no page size; an exact multiple ends without an empty page.
        sb.set_virtual_accounts(80, page_size=40)
        assert len(s.list_virtual_accounts()) == 80
        sb.set_virtual_accounts(5)
        assert len(s.list_virtual_accounts()) == 5


def test_remote_sandbox_sets_virtual_accounts() -> None:
    with Sandbox() as served:
        sb = RemoteSandbox(served.base_url, client_id=served.client_id, client_secret=served.client_secret, admin_token=served.admin_token)
        sb.set_virtual_accounts(9, page_size=2)
        with sb.client() as c:
            assert len({a["id"] for a in session_of(sb, c).list_virtual_accounts()}) == 9
        with pytest.raises(fxpay.InvalidRequestError, match="page_size"):
            sb.set_virtual_accounts(3, page_size=0)
        with pytest.raises(TypeError, match="count"):
            sb.set_virtual_accounts("3")  # type: ignore[arg-type]


def test_bad_arguments() -> None:
    with Sandbox() as sb:
        with pytest.raises(TypeError, match="count"):
            sb.set_virtual_accounts("3")  # type: ignore[arg-type]
        with pytest.raises(fxpay.InvalidRequestError, match="page_size"):
            sb.set_virtual_accounts(3, page_size=0)
        with pytest.raises(fxpay.InvalidRequestError, match="count"):
            sb.set_virtual_accounts(-1)
        # At most 10,000 accounts, and pages of at most 10,000: the bound of what one control
        # makes a sandbox hold. The edges themselves are accepted.
        with pytest.raises(fxpay.InvalidRequestError, match="count must be between 0 and 10000, got 10001"):
            sb.set_virtual_accounts(10_001)
        with pytest.raises(fxpay.InvalidRequestError, match="page_size must be between 1 and 10000, got 10001"):
            sb.set_virtual_accounts(3, page_size=10_001)
        sb.set_virtual_accounts(10_000, page_size=10_000)
        sb.set_virtual_accounts(0, page_size=1)


def test_the_admin_api_bounds_its_accounts_and_a_missing_page_is_404() -> None:
    """Over HTTP: the same bounds as the embedded control (400, named field), and a page that
    does not exist is 404 with field ``page``, with or without paging set."""
    import httpx

    with Sandbox() as sb, sb.client() as c:
        admin = {"Authorization": f"Bearer {sb.admin_token}"}
        with httpx.Client(base_url=sb.base_url) as h:
            for body, field in [
                ({"count": 10_001}, "count"),
                ({"count": 3, "page_size": 10_001}, "page_size"),
                ({"count": 3, "page_size": 0}, "page_size"),
            ]:
                r = h.post("/_sandbox/set_virtual_accounts", json=body, headers=admin)
                assert (r.status_code, r.json()["errors"][0]["fieldName"]) == (400, field), body
            token = session_of(sb, c).token.access_token
            user = {"Authorization": f"Bearer {token}"}

            def page(q: str) -> tuple[int, int | str]:
                r = h.get(f"/v1/gca/virtual-accounts{q}", headers=user)
                if r.status_code == 200:
                    return 200, len(r.json()["virtualAccounts"])
                return r.status_code, r.json()["errors"][0]["fieldName"]

            # The fixed accounts are one page.
            assert [page(q) for q in ("", "?page=1", "?page=2", "?page=0", "?page=x")] == [
                (200, 3),
                (200, 3),
                (404, "page"),
                (404, "page"),
                (404, "page"),
            ]
            r = h.post("/_sandbox/set_virtual_accounts", json={"count": 10_000, "page_size": 4_000}, headers=admin)
            assert r.status_code == 200
            assert [page(f"?page={n}") for n in (1, 2, 3, 4)] == [(200, 4_000), (200, 4_000), (200, 2_000), (404, "page")]


# -- a hand-made service ------------------------------------------------------------------

Pages = Callable[[str, str], tuple[dict[str, Any], dict[str, str]]]


class _Service(BaseHTTPRequestHandler):
    pages: Pages
    seen: list[str]

    def do_POST(self) -> None:  # the token endpoint
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        body = {"access_token": "at", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt", "scope": "gca-aisp"}
        self._send(body, {})

    def do_GET(self) -> None:
        self.seen.append(self.path)
        body, headers = self.pages(self.path, f"http://127.0.0.1:{self.server.server_address[1]}")
        self._send(body, headers)

    def _send(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def service() -> Iterator[Callable[[Pages], tuple[fxpay.UserSession, list[str]]]]:
    servers: list[ThreadingHTTPServer] = []
    clients: list[fxpay.Client] = []

    def make(pages: Pages) -> tuple[fxpay.UserSession, list[str]]:
        seen: list[str] = []
        handler = type("H", (_Service,), {"pages": staticmethod(pages), "seen": seen})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        c = fxpay.Client("id", "secret", base_url=f"http://127.0.0.1:{httpd.server_address[1]}")
        clients.append(c)
        token = fxpay.Token.from_dict(
            {"access_token": "at", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt", "scope": "gca-aisp"}
        )
        return c.user_session(token), seen

    yield make
    for c in clients:
        c.close()
    for s in servers:
        s.shutdown()
        s.server_close()


def acct(i: int) -> dict[str, Any]:
    return {"id": f"a{i}", "currency": "EUR"}


def test_shapes_that_are_followed(service: Any) -> None:
    def pages(path: str, origin: str) -> tuple[dict[str, Any], dict[str, str]]:
        if path.endswith("virtual-accounts"):  # an absolute URL under links
            return {"data": [acct(1)], "links": {"next": f"{origin}/v1/gca/virtual-accounts?p=2"}}, {}
        if path.endswith("p=2"):  # a reference relative to the page
            return {"data": [acct(2)], "next": "?p=3"}, {}
        if path.endswith("p=3"):  # HAL
            return {"data": [acct(3)], "_links": {"next": {"href": "/v1/gca/virtual-accounts?p=4"}}}, {}
        if path.endswith("p=4"):  # an RFC 8288 Link header
            return {"data": [acct(4)]}, {"Link": '</v1/gca/virtual-accounts?p=5>; rel="next"'}
        return {"data": [acct(5)], "next": None, "hasMore": False}, {}

    s, seen = service(pages)
    assert [a["id"] for a in s.list_virtual_accounts()] == ["a1", "a2", "a3", "a4", "a5"]
    assert len(seen) == 5


@pytest.mark.parametrize(
    ("second", "match"),
    [
        ({"data": [acct(2)], "next": "/v1/gca/virtual-accounts"}, "already fetched"),  # a loop
        ({"data": [acct(2)], "next": "http://evil.example:80/v1/gca/virtual-accounts?p=3"}, "another origin"),
        ({"data": [acct(2)], "nextCursor": "c3"}, "nextCursor"),
        ({"data": [acct(2)], "meta": {"has_more": True}}, "has_more"),
        ({"data": [acct(2)], "page": 2, "totalPages": 4}, "page 2 of 4"),
        ({"data": [acct(2)], "next": "/elsewhere/x"}, "outside the API"),
    ],
)
def test_links_that_cannot_be_followed_are_a_pagination_error(service: Any, second: dict[str, Any], match: str) -> None:
    def pages(path: str, origin: str) -> tuple[dict[str, Any], dict[str, str]]:
        if path.endswith("virtual-accounts"):
            return {"data": [acct(1)], "next": "/v1/gca/virtual-accounts?p=2"}, {}
        return second, {}

    s, seen = service(pages)
    with pytest.raises(fxpay.PaginationError, match=match) as e:
        s.list_virtual_accounts()
    assert isinstance(e.value, fxpay.ApiError)
    assert e.value.status == 200
    assert len(seen) == 2  # nothing was fetched from elsewhere, and nothing twice
