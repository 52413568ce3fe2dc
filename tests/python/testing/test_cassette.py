"""Cassettes: record against a served sandbox, stop it, replay with nothing listening."""

from __future__ import annotations

import gc
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import fxpay
from fxpay.testing import Cassette, CassetteMismatchError, RemoteSandbox, Sandbox

from conftest import all_at_once, make_beneficiary

CALLBACK = "https://hooks.example.test/fx"
GIVEN_NONCE = "given-nonce-0123456789abcdef"


class Served:
    """A `python -m fxpay.sandbox` subprocess and the credentials it printed."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "fxpay.sandbox", "--port", "0"], stdout=subprocess.PIPE, text=True)
        env: dict[str, str] = {}
        assert self.proc.stdout is not None
        while "FXPAY_ADMIN_TOKEN" not in env:
            line = self.proc.stdout.readline()
            assert line, "the sandbox exited before printing its settings"
            key, _, value = line.strip().partition("=")
            env[key] = value
        self.base_url = env["FXPAY_BASE_URL"]
        self.client_id = env["FXPAY_CLIENT_ID"]
        self.client_secret = env["FXPAY_CLIENT_SECRET"]
        self.redirect_uri = env["FXPAY_REDIRECT_URI"]
        self.username = env["FXPAY_USERNAME"]
        self.password = env["FXPAY_PASSWORD"]
        self.admin_token = env["FXPAY_ADMIN_TOKEN"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


@pytest.fixture
def served() -> Iterator[Served]:
    s = Served()
    try:
        yield s
    finally:
        s.stop()


def nothing_listens(base_url: str) -> bool:
    u = urlsplit(base_url)
    with socket.socket() as s:
        return s.connect_ex((u.hostname or "127.0.0.1", u.port or 80)) != 0


def approve(served: Served, auth: fxpay.AuthorizationRequest) -> str:
    """Logs in and consents over HTTP like a browser, through the served sandbox's admin API
    (the authorization URL carries the PKCE challenge); returns the callback URL."""
    remote = RemoteSandbox(
        served.base_url,
        client_id=served.client_id,
        client_secret=served.client_secret,
        admin_token=served.admin_token,
    )
    return remote.approve(auth.url)


def flow(c: fxpay.Client, callback: Any) -> dict[str, Any]:
    """Every kind of exchange the client makes, blocking."""
    out: dict[str, Any] = {}
    out["quote_id"] = qid = c.create_quote(buy_currency="USD", buy_amount="1000.10", sell_currency="AUD")
    out["quote"] = c.get_quote(qid)
    bid = c.create_beneficiary(make_beneficiary())
    ben = [fxpay.DealBeneficiary(beneficiary_id=bid, amount=out["quote"].sell_amount, pay_reason="Invoice", pay_reference="INV-1")]
    out["deal"] = c.create_deal(quote_id=qid, funding_source="Own account", beneficiaries=ben)
    q2 = c.create_quote(buy_currency="USD", buy_amount=500, sell_currency="AUD")
    ben2 = [fxpay.DealBeneficiary(beneficiary_id=bid, amount=c.get_quote(q2).sell_amount, pay_reason="Invoice", pay_reference="INV-2")]
    out["spot"] = c.create_spot_deal(quote_id=q2, funding_source="Own account", beneficiaries=ben2, callback_url=CALLBACK)
    q3 = c.create_quote(buy_currency="USD", buy_amount=250, sell_currency="AUD")
    ben3 = [fxpay.DealBeneficiary(beneficiary_id=bid, amount=c.get_quote(q3).sell_amount, pay_reason="Invoice", pay_reference="INV-3")]
    out["spot_given"] = c.create_spot_deal(
        quote_id=q3, funding_source="Own account", beneficiaries=ben3, callback_url=CALLBACK, callback_nonce=GIVEN_NONCE
    )
    with pytest.raises(fxpay.NotFoundError):
        c.get_quote("00000000-0000-0000-0000-000000000000")
    out["payments_token"] = c._payments_token()
    auth = c.authorization_url("https://app.example.test/callback")
    out["auth"] = auth
    out["user_token"] = tok = c.exchange_code(auth, callback(auth))
    out["refreshed"] = tok2 = c.refresh_token(tok.refresh_token)
    out["accounts"] = c.user_session(tok2).list_virtual_accounts()
    return out


async def flow_async(c: fxpay.Client, callback: Any) -> dict[str, Any]:
    """The same exchanges, awaited."""
    out: dict[str, Any] = {}
    out["quote_id"] = qid = await c.create_quote_async(buy_currency="USD", buy_amount="1000.10", sell_currency="AUD")
    out["quote"] = await c.get_quote_async(qid)
    bid = await c.create_beneficiary_async(make_beneficiary())
    ben = [fxpay.DealBeneficiary(beneficiary_id=bid, amount=out["quote"].sell_amount, pay_reason="Invoice", pay_reference="INV-1")]
    out["deal"] = await c.create_deal_async(quote_id=qid, funding_source="Own account", beneficiaries=ben)
    q2 = await c.create_quote_async(buy_currency="USD", buy_amount=500, sell_currency="AUD")
    amount2 = (await c.get_quote_async(q2)).sell_amount
    ben2 = [fxpay.DealBeneficiary(beneficiary_id=bid, amount=amount2, pay_reason="Invoice", pay_reference="INV-2")]
    out["spot"] = await c.create_spot_deal_async(quote_id=q2, funding_source="Own account", beneficiaries=ben2, callback_url=CALLBACK)
    q3 = await c.create_quote_async(buy_currency="USD", buy_amount=250, sell_currency="AUD")
    amount3 = (await c.get_quote_async(q3)).sell_amount
    ben3 = [fxpay.DealBeneficiary(beneficiary_id=bid, amount=amount3, pay_reason="Invoice", pay_reference="INV-3")]
    out["spot_given"] = await c.create_spot_deal_async(
        quote_id=q3, funding_source="Own account", beneficiaries=ben3, callback_url=CALLBACK, callback_nonce=GIVEN_NONCE
    )
    with pytest.raises(fxpay.NotFoundError):
        await c.get_quote_async("00000000-0000-0000-0000-000000000000")
    auth = c.authorization_url("https://app.example.test/callback")
    out["user_token"] = tok = await c.exchange_code_async(auth, callback(auth))
    out["refreshed"] = tok2 = await c.refresh_token_async(tok.refresh_token)
    out["accounts"] = await c.user_session(tok2).list_virtual_accounts_async()
    return out


def replay_callback(auth: fxpay.AuthorizationRequest) -> str:
    # The code is scrubbed to a placeholder, so any code replays; the state is checked locally.
    return f"{auth.redirect_uri}?code=some-other-code&state={auth.state}"


def secrets_of(served: Served, rec: dict[str, Any]) -> dict[str, str]:
    s = {
        "client secret": served.client_secret,
        "payments access token": rec["payments_token"].access_token,
        "user access token": rec["user_token"].access_token,
        "user refresh token": rec["user_token"].refresh_token,
        "refreshed access token": rec["refreshed"].access_token,
        "refreshed refresh token": rec["refreshed"].refresh_token,
        "generated nonce": rec["spot"].callback_nonce,
        "given nonce": GIVEN_NONCE,
        "code": rec["code"],
        "password": served.password,
    }
    verifier = getattr(rec["auth"], "code_verifier", None)
    if verifier:
        s["code verifier"] = verifier
    assert all(s.values()), s
    return s


def test_record_served_sandbox_then_replay_with_nothing_listening(served: Served, tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "flow.json"
    codes: list[str] = []

    def live_callback(auth: fxpay.AuthorizationRequest) -> str:
        cb = approve(served, auth)
        codes.append(dict(p.split("=", 1) for p in urlsplit(cb).query.split("&"))["code"])
        return cb

    cas = Cassette(path, mode="record")
    assert cas.mode == "record"
    with fxpay.Client(served.client_id, served.client_secret, base_url=served.base_url, cassette=cas) as c:
        rec = flow(c, live_callback)
        assert not path.exists(), "the file is written when the client closes"
    rec["code"] = codes[0]
    assert path.exists()
    text = path.read_text()

    # Readable JSON in a stable order.
    doc = json.loads(text)
    assert list(doc) == ["fxpay_cassette", "base_url", "client_id", "interactions"]
    assert doc["client_id"] == served.client_id
    assert doc["base_url"] == served.base_url
    first = doc["interactions"][0]
    assert list(first) == ["request", "response"]
    assert first["request"]["method"] == "POST"
    assert first["request"]["path"] == "/oauth/token"
    assert text.startswith("{\n  ")
    methods = [(x["request"]["method"], x["request"]["path"]) for x in doc["interactions"]]
    assert ("GET", "/gca/virtual-accounts") in methods
    assert "1000.10" in text  # amounts exactly as written

    # No secret reaches the file.
    for name, secret in secrets_of(served, rec).items():
        assert secret not in text, f"the {name} is in the cassette"
    assert "fxpay-scrubbed-client-secret-1" in text
    assert "Bearer fxpay-scrubbed-access-token-1" in text
    assert "fxpay-scrubbed-code-1" in text
    assert "fxpay-scrubbed-nonce-1" in text
    assert "fxpay-scrubbed-refresh-token-1" in text

    served.stop()
    assert nothing_listens(served.base_url)

    # Blocking replay: same answers, no network.
    cas = Cassette(path)  # "once": the file exists, so it replays
    assert cas.mode == "replay"
    with fxpay.Client(served.client_id, "not-the-recorded-secret", base_url=served.base_url, cassette=cas) as c:
        rep = flow(c, replay_callback)
    for key in ("quote_id", "quote", "deal", "accounts"):
        assert rep[key] == rec[key], key
    assert rep["spot"].process_id == rec["spot"].process_id
    assert rep["spot_given"] == rec["spot_given"]
    assert rep["user_token"].access_token.startswith("fxpay-scrubbed-access-token-")
    assert cas.played == cas.recorded
    assert path.read_text() == text, "a replay does not rewrite the file"


async def test_replay_awaited_with_nothing_listening(served: Served, tmp_path: Path) -> None:
    path = tmp_path / "flow.json"
    cas = Cassette(path, mode="record")
    async with fxpay.Client(served.client_id, served.client_secret, base_url=served.base_url, cassette=cas) as c:
        rec = await flow_async(c, lambda auth: approve(served, auth))
    served.stop()
    assert nothing_listens(served.base_url)
    cas = Cassette(path, mode="replay")
    async with fxpay.Client(served.client_id, served.client_secret, base_url=served.base_url, cassette=cas) as c:
        rep = await flow_async(c, replay_callback)
    for key in ("quote_id", "quote", "deal", "spot_given", "accounts"):
        assert rep[key] == rec[key], key
    assert cas.played == cas.recorded


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    path = tmp_path / "quote.json"
    with Sandbox() as sb, sb.client(cassette=Cassette(path, mode="record")) as c:
        c.get_quote(c.create_quote(buy_currency="EUR", buy_amount=10, sell_currency="JPY"))
    return path


def replay_client(path: Path) -> fxpay.Client:
    cas = Cassette(path, mode="replay")
    return cas.client()


def test_a_miss_names_method_and_path(recorded: Path) -> None:
    with replay_client(recorded) as c:
        with pytest.raises(CassetteMismatchError) as e:
            c.get_quote("abc-123")
        assert isinstance(e.value, fxpay.FxPayError)
        assert e.value is not None
        assert "GET /payments/quotes/abc-123" in str(e.value)
        # A different body on a recorded route is a miss too.
        with pytest.raises(CassetteMismatchError, match=r"POST /payments/quotes.*body differs"):
            c.create_quote(buy_currency="EUR", buy_amount=11, sell_currency="JPY")
        # The recorded exchanges still replay, once each, in order.
        qid = c.create_quote(buy_currency="EUR", buy_amount=10, sell_currency="JPY")
        assert c.get_quote(qid).buy_amount == 10
        with pytest.raises(CassetteMismatchError, match="GET /payments/quotes/"):
            c.get_quote(qid)


async def test_a_miss_awaited(recorded: Path) -> None:
    async with replay_client(recorded) as c:
        with pytest.raises(CassetteMismatchError, match="POST /payments/quotes"):
            await c.create_quote_async(buy_currency="USD", buy_amount=10, sell_currency="JPY")


def test_modes_and_bad_arguments(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "once.json"
    cas = Cassette(str(path))
    assert cas.mode == "record"
    assert cas.base_url is None
    with Sandbox() as sb:
        with sb.client(cassette=cas) as c:
            c.create_quote(buy_currency="EUR", buy_amount=10, sell_currency="JPY")
        again = Cassette(path)
        assert again.mode == "replay"
        assert again.recorded == 2
        assert again.client_id == sb.client_id
        assert again.base_url == sb.base_url
        assert Cassette(path, mode="record").mode == "record"
    with pytest.raises(fxpay.ConfigurationError, match=r"missing\.json"):
        Cassette(tmp_path / "missing.json", mode="replay")
    with pytest.raises(fxpay.InvalidRequestError, match="mode"):
        Cassette(path, mode="rewind")
    with pytest.raises(TypeError, match="path"):
        Cassette(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="mode"):
        Cassette(path, mode=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cassette"):
        fxpay.Client("id", "secret", base_url="http://127.0.0.1:9", cassette=str(path))  # type: ignore[arg-type]
    (tmp_path / "bad.json").write_text("not json")
    with pytest.raises(fxpay.ConfigurationError, match="not a cassette"):
        Cassette(tmp_path / "bad.json", mode="replay")


async def test_written_on_aclose(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    with Sandbox() as sb:
        c = sb.client(cassette=Cassette(path, mode="record"))
        await c.create_quote_async(buy_currency="EUR", buy_amount=10, sell_currency="JPY")
        assert not path.exists()
        await c.aclose()
    assert len(json.loads(path.read_text())["interactions"]) == 2


def test_written_at_garbage_collection_if_never_closed(tmp_path: Path) -> None:
    path = tmp_path / "gc.json"
    with Sandbox() as sb:
        c = sb.client(cassette=Cassette(path, mode="record"))
        c.create_quote(buy_currency="EUR", buy_amount=10, sell_currency="JPY")
        assert not path.exists()
        del c
        gc.collect()
    assert len(json.loads(path.read_text())["interactions"]) == 2


def test_connection_failures_replay(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again at once: nothing listens there
    url = f"http://127.0.0.1:{port}"
    path = tmp_path / "down.json"
    with (
        fxpay.Client("id", "secret", base_url=url, max_retries=0, cassette=Cassette(path, mode="record")) as c,
        pytest.raises(fxpay.TransportError),
    ):
        c.create_quote(buy_currency="EUR", buy_amount=10, sell_currency="JPY")
    doc = json.loads(path.read_text())
    assert "error" in doc["interactions"][0]
    with fxpay.Client("id", "secret", base_url=url, cassette=Cassette(path, mode="replay")) as c, pytest.raises(fxpay.TransportError):
        c.create_quote(buy_currency="EUR", buy_amount=10, sell_currency="JPY")


def test_concurrent_calls_record_and_replay(tmp_path: Path) -> None:
    path = tmp_path / "threads.json"
    with Sandbox() as sb, sb.client(cassette=Cassette(path, mode="record")) as c:
        qid = c.create_quote(buy_currency="EUR", buy_amount=10, sell_currency="JPY")
        want = all_at_once(8, lambda: c.get_quote(qid))
    doc = json.loads(path.read_text())
    assert [x["request"]["path"] for x in doc["interactions"]].count("/oauth/token") == 1
    cas = Cassette(path, mode="replay")
    with cas.client() as c:
        assert c.create_quote(buy_currency="EUR", buy_amount=10, sell_currency="JPY") == qid
        got = all_at_once(8, lambda: c.get_quote(qid))
    assert got == want
    assert cas.played == cas.recorded == 10


class BytesPath:
    """An os.PathLike whose path is bytes."""

    def __fspath__(self) -> bytes:
        return b"/tmp/cassette.json"


def test_the_checks_name_what_is_wrong_and_path_is_the_path_given(tmp_path: Path) -> None:
    path = tmp_path / "new.json"
    cas = Cassette(path, mode="record")
    assert cas.path == str(path)
    assert repr(cas) == f"Cassette(path={str(path)!r}, mode='record')"
    with pytest.raises(TypeError, match=r"^path must be a str or os\.PathLike\[str\], got bytes$"):
        Cassette(BytesPath())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^mode must be a str, got int$"):
        Cassette(path, mode=1)  # type: ignore[arg-type]
    with pytest.raises(fxpay.ConfigurationError, match=r"names no recording client"):
        cas.client()
    # A file edited by hand may name only one of the two.
    for only in ({"base_url": "http://127.0.0.1:9"}, {"client_id": "recorder"}):
        half = tmp_path / "half.json"
        half.write_text(json.dumps({"fxpay_cassette": 1, **only, "interactions": []}))
        with pytest.raises(fxpay.ConfigurationError, match=r"names no recording client"):
            Cassette(half, mode="replay").client()


def test_save_writes_the_file_before_the_client_closes(tmp_path: Path) -> None:
    path = tmp_path / "saved.json"
    cas = Cassette(path, mode="record")
    with Sandbox() as sb, sb.client(cassette=cas) as c:
        c.create_quote(buy_currency="EUR", buy_amount=10, sell_currency="JPY")
        assert not path.exists()
        cas.save()
        assert len(json.loads(path.read_text())["interactions"]) == 2
