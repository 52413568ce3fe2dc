"""schemathesis fuzzes the sandbox against its own OpenAPI 3.1 document, over every operation
(payments, OAuth, account information and the `/_sandbox/` admin API) with all of its checks,
`negative_data_rejection` and `positive_data_acceptance` included (issues 23.7 and 31).

Each pass runs on a fresh sandbox (a pass that resets the sandbox or re-registers its client
would disturb the next one), with the token its operations need. The examples, coverage,
fuzzing and stateful phases all run; both valid and invalid data are sent.

One deliberate limit, because this suite uses no network:
- the callback headers of `createSpotDeal` are pinned to a loopback address
  (`schemathesis.toml` below). A schema-valid callback URL makes the sandbox deliver a
  `DealCreated` notification to it, and schemathesis would pick hosts anywhere on the
  internet. The rule of those headers is checked instead by `test_sandbox_spec_audit.py`,
  which compares the published pattern, the sandbox and the client on the audit's edge values
  (ports over 65535, empty hosts, upper-case loopback names...) and on generated URLs, without
  ever making a deal that notifies.
`adminSendEvent` runs like every other operation: its `url` is restricted to loopback
(`http` or `https` on localhost, 127.x.y.z or [::1]) in the document and in the sandbox alike
(issue 46 item 4), so whatever schemathesis generates, the sandbox delivers on this machine or
refuses.

Runtime: about 35 s for the five passes at 25 examples per operation (2 cores);
`FXPAY_SCHEMATHESIS_EXAMPLES` raises it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from conftest import need

need("schemathesis")
EXAMPLES = os.environ.get("FXPAY_SCHEMATHESIS_EXAMPLES", "25")
CONFIG = """\
[[operations]]
include-operation-id = "createSpotDeal"
parameters = { "header.callback-location" = "http://127.0.0.1:9/deal", "header.callback-url" = "http://127.0.0.1:9/deal" }
"""


def run(sb: Any, token: str, config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"
    return subprocess.run(
        [
            exe,
            "--config-file",
            str(config),
            "run",
            f"{sb.base_url}/openapi.json",
            *extra,
            "--max-examples",
            EXAMPLES,
            "--checks",
            "all",
            "--header",
            f"Authorization: Bearer {token}",
            "--generation-codec",
            "ascii",  # header values must be latin-1 for the HTTP client
            "--generation-deterministic",
            "--request-timeout",
            "10",
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture
def config(tmp_path: Path) -> Path:
    p = tmp_path / "schemathesis.toml"
    p.write_text(CONFIG)
    return p


def user_token(sb: Any) -> str:
    c = sb.client()
    auth = c.authorization_url(sb.redirect_uri)
    return str(c.exchange_code(auth, sb.approve(auth.url)).access_token)


# (id, token kind, operations)
PASSES = [
    ("payments-and-oauth", "payments", ("--exclude-path-regex", "^/_sandbox/")),
    ("account-information-and-oauth", "user", ("--include-path-regex", "^/v1/(gca|oauth)/")),
    ("admin", "admin", ("--include-path-regex", "^/_sandbox/")),
]
PHASES = ["examples,fuzzing,stateful", "coverage"]


@pytest.mark.parametrize("phases", PHASES)
@pytest.mark.parametrize(("kind", "operations"), [(k, o) for _, k, o in PASSES], ids=[i for i, _, _ in PASSES])
def test_every_operation_with_all_checks(fxpay_sandbox: Any, config: Path, kind: str, operations: tuple[str, ...], phases: str) -> None:
    sb = fxpay_sandbox
    token = {
        "payments": lambda: sb.client()._payments_token().access_token,
        "user": lambda: user_token(sb),
        "admin": lambda: sb.admin_token,
    }[kind]()
    r = run(sb, token, config, *operations, "--phases", phases)
    out = r.stdout + r.stderr
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-2000:]
    m = re.search(r"(\d+) generated, (\d+) passed", out)
    assert m is not None, out[-3000:]
    assert int(m.group(1)) == int(m.group(2)) > 20, m.group(0)
    # Every operation the pass selects is tested (none skipped for lack of data or auth).
    selected = re.search(r"Selected: (\d+)/(\d+)", out)
    tested = re.search(r"Tested: (\d+)", out)
    assert selected is not None, out[-3000:]
    assert tested is not None, out[-3000:]
    assert tested.group(1) == selected.group(1), (selected.group(0), tested.group(0))
    if kind == "admin":
        # Every admin operation, adminSendEvent included (issue 46 item 4) ...
        with urllib.request.urlopen(f"{sb.base_url}/openapi.json", timeout=10) as doc:
            paths = json.load(doc)["paths"]
        admin = [op["operationId"] for path, ops in paths.items() if path.startswith("/_sandbox/") for op in ops.values()]
        assert "adminSendEvent" in admin
        assert int(selected.group(1)) == len(admin), selected.group(0)
        # ... and whatever it sent went to this machine only.
        sent = [d["url"] for d in sb.deliveries() if d["kind"] == "sent"]
        assert all(urllib.parse.urlsplit(u).hostname in ("localhost", "::1") or u.split("//")[1].startswith("127.") for u in sent), sent
    if kind == "payments" and "fuzzing" in phases:
        assert sb.stats()["requests"] > 100
        # Every notification went to the pinned loopback address, none elsewhere.
        assert {d["url"] for d in sb.deliveries()} <= {"http://127.0.0.1:9/deal"}
