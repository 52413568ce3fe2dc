"""A real headless Chromium drives the sandbox's login and consent pages through to the
code exchange."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import need, need_program

playwright_sync = need("playwright.sync_api")

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Any:
    chromium = need_program("chromium", "chromium-browser")
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


def drive(browser: Any, sb: Any, auth_url: str, *, decision: str, tmp_path: Path, password: str | None = None) -> str:
    """Logs in and decides on the consent page; returns the URL the browser was redirected to."""
    landed: list[str] = []
    context = browser.new_context()
    page = context.new_page()

    def catch(route: Any) -> None:
        landed.append(route.request.url)
        route.fulfill(status=200, content_type="text/html", body="<p>back at the app</p>")

    page.route("https://app.example.test/**", catch)
    page.goto(auth_url)
    assert page.title().startswith("Sign in")
    page.fill("#username", sb.username)
    page.fill("#password", password or sb.password)
    page.click("#login")
    if password is not None:
        page.wait_for_selector("#login-form")
        html = str(page.content())
        context.close()
        return html
    page.wait_for_selector(f"button[value={decision}], #{decision}")
    page.screenshot(path=str(tmp_path / "consent.png"))
    page.click(f"#{decision}")
    page.wait_for_url("https://app.example.test/**")
    context.close()
    assert len(landed) == 1
    return landed[0]


def test_allow_in_a_real_browser(browser: Any, fxpay_sandbox: Any, tmp_path: Path) -> None:
    c = fxpay_sandbox.client()
    auth = c.authorization_url(fxpay_sandbox.redirect_uri)
    callback = drive(browser, fxpay_sandbox, auth.url, decision="allow", tmp_path=tmp_path)
    assert callback.startswith(fxpay_sandbox.redirect_uri + "?")
    assert (tmp_path / "consent.png").stat().st_size > 1000
    token = c.exchange_code(auth, callback)
    assert token.scope == "gca-aisp"
    assert token.refresh_token
    accounts = c.user_session(token).list_virtual_accounts()
    assert {a["currency"] for a in accounts} >= {"USD"}


def test_deny_in_a_real_browser(browser: Any, fxpay_sandbox: Any, tmp_path: Path) -> None:
    c = fxpay_sandbox.client()
    auth = c.authorization_url(fxpay_sandbox.redirect_uri)
    callback = drive(browser, fxpay_sandbox, auth.url, decision="deny", tmp_path=tmp_path)
    assert "error=access_denied" in callback
    with pytest.raises(fxpay.OAuthError) as ei:
        c.exchange_code(auth, callback)
    assert ei.value.error == "access_denied"


def test_wrong_password_stays_on_the_login_page(browser: Any, fxpay_sandbox: Any, tmp_path: Path) -> None:
    c = fxpay_sandbox.client()
    auth = c.authorization_url(fxpay_sandbox.redirect_uri)
    html = drive(browser, fxpay_sandbox, auth.url, decision="allow", tmp_path=tmp_path, password="wrong")
    assert 'id="login-form"' in html
    assert fxpay_sandbox.stats()["tokens_issued"]["authorization_code"] == 0


def test_pkce_in_a_real_browser(browser: Any, fxpay_sandbox: Any, tmp_path: Path) -> None:
    """The S256 challenge travels through the browser's login and consent pages; the code it
    yields is redeemed only with the verifier."""
    import base64
    import hashlib
    from urllib.parse import parse_qs, urlsplit

    c = fxpay_sandbox.client()
    auth = c.authorization_url(fxpay_sandbox.redirect_uri)  # pkce=True is the default
    challenge = parse_qs(urlsplit(auth.url).query)["code_challenge"][0]
    expected = base64.urlsafe_b64encode(hashlib.sha256(auth.code_verifier.encode()).digest()).rstrip(b"=").decode()
    assert challenge == expected
    context = browser.new_context()
    page = context.new_page()
    page.goto(auth.url)
    assert page.get_attribute("input[name=code_challenge]", "value") == challenge
    assert page.get_attribute("input[name=code_challenge_method]", "value") == "S256"
    context.close()
    callback = drive(browser, fxpay_sandbox, auth.url, decision="allow", tmp_path=tmp_path)
    without = fxpay.AuthorizationRequest(**{**auth.to_dict(), "code_verifier": None})
    with pytest.raises(fxpay.OAuthError) as ei:
        c.exchange_code(without, callback)
    assert ei.value.error == "invalid_grant"
    token = c.exchange_code(auth, callback)
    assert token.scope == "gca-aisp"
    assert token.refresh_token


def test_plain_pkce_is_refused_in_a_real_browser(browser: Any, fxpay_sandbox: Any) -> None:
    import html
    from urllib.parse import parse_qs, urlencode, urlsplit

    sb = fxpay_sandbox
    query = {
        "response_type": "code",
        "client_id": sb.client_id,
        "redirect_uri": sb.redirect_uri,
        "scope": "gca-aisp",
        "state": "st-plain",
        "code_challenge": "p" * 43,
        "code_challenge_method": "plain",
    }
    landed: list[str] = []
    context = browser.new_context()
    page = context.new_page()

    def catch(route: Any) -> None:
        landed.append(route.request.url)
        route.fulfill(status=200, content_type="text/html", body="<p>back at the app</p>")

    page.route("https://app.example.test/**", catch)
    # Followed from a link, as a user would: the redirect it ends in reaches the route above.
    href = html.escape(f"{sb.base_url}/v1/oauth/authorize?{urlencode(query)}")
    page.set_content(f'<a id="go" href="{href}">sign in</a>')
    page.click("#go")
    page.wait_for_url("https://app.example.test/**")
    context.close()
    assert len(landed) == 1
    q = parse_qs(urlsplit(landed[0]).query)
    assert q["error"] == ["invalid_request"]
    assert q["state"] == ["st-plain"]
    assert "S256" in q["error_description"][0]
