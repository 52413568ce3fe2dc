"""The account-information consent flow in a FastAPI app.

    GET /connect    -> redirects the user to the service's login and consent pages
    GET /callback   -> checks the state, exchanges the code, lists the virtual accounts

Run it and it serves the app on 127.0.0.1 next to an embedded sandbox, then walks through
the flow once by itself (the sandbox's ``approve`` stands in for the user's browser).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import RedirectResponse

import fxpay
from fxpay.testing import Sandbox


def create_app(client: fxpay.Client, redirect_uri: str) -> FastAPI:
    app = FastAPI()
    pending: dict[str, fxpay.AuthorizationRequest] = {}  # a real app keeps this in the user's session
    tokens: dict[str, fxpay.Token] = {}  # ... and this in its database

    @app.get("/connect")
    def connect() -> RedirectResponse:
        auth = client.authorization_url(redirect_uri)
        pending[auth.state] = auth
        return RedirectResponse(auth.url, status_code=302)

    @app.get("/callback")
    async def callback(request: Request) -> dict[str, Any]:
        auth = pending.pop(request.query_params.get("state", ""), None)
        if auth is None:
            raise HTTPException(400, "unknown or reused state")
        try:
            token = await client.exchange_code_async(auth, str(request.url))
        except fxpay.OAuthError as e:
            raise HTTPException(403, f"consent not given: {e.error}") from e
        session = client.user_session(token, on_token=lambda t: tokens.__setitem__("user-1", t))
        tokens["user-1"] = token
        accounts = await session.list_virtual_accounts_async()
        return {"accounts": [{"currency": a["currency"], "balance": str(a.get("balance"))} for a in accounts]}

    return app


def main() -> None:
    with Sandbox() as sb, sb.client() as client:
        app = create_app(client, sb.redirect_uri)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        app_url = f"http://127.0.0.1:{port}"
        with httpx.Client() as http:
            login = http.get(f"{app_url}/connect")
            assert login.status_code == 302
            back = sb.approve(login.headers["location"])  # the user logs in and allows
            query = back.split("?", 1)[1]
            result = http.get(f"{app_url}/callback?{query}").json()
            for a in result["accounts"]:
                print(f"{a['currency']}: {a['balance']}")
            assert http.get(f"{app_url}/callback?{query}").status_code == 400  # a state is used once
        server.should_exit = True
        thread.join(5)


if __name__ == "__main__":
    main()
