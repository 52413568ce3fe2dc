"""schemathesis fuzzes the sandbox against its own OpenAPI 3.1 document: no 5xx, and every
response conforms to the schema (status codes, content types, bodies, headers)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import need

need("schemathesis")
CHECKS = ",".join(
    [
        "not_a_server_error",
        "response_schema_conformance",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
    ]
)
EXAMPLES = os.environ.get("FXPAY_SCHEMATHESIS_EXAMPLES", "25")


def run(sb: Any, token: str, *extra: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"
    return subprocess.run(
        [
            exe,
            "run",
            f"{sb.base_url}/openapi.json",
            *extra,
            "--max-examples",
            EXAMPLES,
            "--checks",
            CHECKS,
            "--header",
            f"Authorization: Bearer {token}",
            "--generation-codec",
            "ascii",  # header values must be latin-1 for the HTTP client
            "--generation-deterministic",
            "--request-timeout",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )


# The coverage phase's negative header values (e.g. non-Latin-1 text) cannot be sent by
# schemathesis's own HTTP client, so it runs positive only; the fuzzing and stateful phases
# send both valid and invalid data.
PASSES = [
    ("--mode", "all", "--phases", "examples,fuzzing,stateful"),
    ("--mode", "positive", "--phases", "coverage"),
]


@pytest.mark.parametrize("extra", PASSES, ids=["all-modes", "coverage-positive"])
def test_with_a_payments_token(fxpay_sandbox: Any, extra: tuple[str, ...]) -> None:
    token = fxpay_sandbox.client()._payments_token().access_token
    r = run(fxpay_sandbox, token, *extra)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert " passed" in r.stdout
    assert fxpay_sandbox.stats()["requests"] > 100


@pytest.mark.parametrize("extra", PASSES, ids=["all-modes", "coverage-positive"])
def test_with_a_user_token(fxpay_sandbox: Any, extra: tuple[str, ...]) -> None:
    c = fxpay_sandbox.client()
    auth = c.authorization_url(fxpay_sandbox.redirect_uri)
    token = c.exchange_code(auth, fxpay_sandbox.approve(auth.url))
    r = run(fxpay_sandbox, token.access_token, *extra)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
