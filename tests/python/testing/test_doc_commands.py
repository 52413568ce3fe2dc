"""Issue 46 item 16: what docs/testing.md shows, run as it shows it. The Django snippet is a
test file that pytest collects and runs once (it used to call its own test at module level,
so under pytest the test ran twice and failed); the CI recipe that serves a sandbox and runs
the suite against it never reads a stale ``sandbox.env`` of an earlier run. Item 15: the
served-mTLS recipe (``--tls --client-auth``) runs as shown, with the pytest plugin's fixtures
and ``Client.from_env()`` reading every line the sandbox printed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import need, need_program

#: Run before the recipe's lines: stop at the first failing line, and stop the served sandbox
#: however the script ends (its `kill %1` is not reached after a failure).
HARNESS = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PAGE = ROOT / "docs" / "testing.md"


def block_named(first_line: str, fence: str = "python") -> str:
    """The ```{fence} block of docs/testing.md whose first line is ``first_line``."""
    for m in re.finditer(rf"^```{fence}\n(.*?)^```", PAGE.read_text(), re.S | re.M):
        if m.group(1).startswith(first_line):
            return m.group(1)
    raise AssertionError(f"no {fence} block starting {first_line!r} in {PAGE}")


def test_the_django_snippet_runs_once_under_pytest(tmp_path: Path) -> None:
    need("django")
    code = block_named("# tests/test_django_webhooks.py")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_django_webhooks.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FXPAY_", "DJANGO_"))}
    # The reader's project (myproject/ with its settings and urls) is the stand-in the docs'
    # blocks use.
    env["PYTHONPATH"] = os.pathsep.join([str(HERE / "doc_context"), env.get("PYTHONPATH", "")])
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "tests/test_django_webhooks.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"\b1 passed\b", r.stdout), r.stdout[-2000:]


def test_the_ci_recipe_serves_a_sandbox_and_never_reads_a_stale_file(tmp_path: Path) -> None:
    bash = need_program("bash")
    lines = [ln.removeprefix("$ ").split("  #")[0].rstrip() for ln in block_named("$ pytest", "console").splitlines()]
    # The recipe as the docs show it, with pytest running one test that needs the served
    # sandbox's lines; an earlier run's sandbox.env (a dead sandbox) is left in the folder.
    (tmp_path / "sandbox.env").write_text("FXPAY_BASE_URL=http://127.0.0.1:9\nFXPAY_ADMIN_TOKEN=stale\n")
    (tmp_path / "test_served.py").write_text(
        "import os\n"
        "import fxpay.testing\n\n\n"
        "def test_served():\n"
        "    if 'FXPAY_ADMIN_TOKEN' not in os.environ:\n"
        "        return  # the embedded run\n"
        "    assert os.environ['FXPAY_ADMIN_TOKEN'] != 'stale'\n"
        "    sb = fxpay.testing.RemoteSandbox(os.environ['FXPAY_BASE_URL'], client_id=os.environ['FXPAY_CLIENT_ID'],\n"
        "                                     client_secret=os.environ['FXPAY_CLIENT_SECRET'],\n"
        "                                     admin_token=os.environ['FXPAY_ADMIN_TOKEN'])\n"
        "    assert sb.now() > 0\n"
    )
    python = shutil.which("python", path=str(Path(sys.executable).parent)) or sys.executable
    pytest_cmd = f"{python} -m pytest -q -p no:cacheprovider -p no:randomly test_served.py"
    script = HARNESS + "\n".join(
        ln.replace("pytest", pytest_cmd).replace("python -m fxpay.sandbox", f"{sys.executable} -m fxpay.sandbox") for ln in lines
    )
    assert "rm -f sandbox.env" in script
    env = {k: v for k, v in os.environ.items() if not k.startswith("FXPAY_")}
    r = subprocess.run([bash, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert r.stdout.count("1 passed") == 2, r.stdout[-3000:]


MTLS_TEST = """\
import os

import fxpay


def test_fixtures_and_from_env_reach_the_mtls_sandbox(fxpay_sandbox, fxpay_client):
    assert fxpay_sandbox.client_cert == os.environ["FXPAY_CLIENT_CERT"]
    fxpay_sandbox.reset()                                   # the admin API, over mutual TLS
    assert fxpay_client.create_quote(buy_currency="USD", buy_amount=100, sell_currency="EUR")
    with fxpay.Client.from_env() as c:                      # CA bundle, certificate and key
        assert c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="EUR")
    assert fxpay_sandbox.stats()["quotes"] == 2
"""


def test_the_served_mtls_recipe_runs_as_shown(tmp_path: Path) -> None:
    bash = need_program("bash")
    lines = [
        ln.removeprefix("$ ").split("  #")[0].rstrip()
        for ln in block_named("$ rm -f sandbox.env\n$ python -m fxpay.sandbox --port 0 --tls", "console").splitlines()
    ]
    (tmp_path / "test_mtls.py").write_text(MTLS_TEST)
    python = shutil.which("python", path=str(Path(sys.executable).parent)) or sys.executable
    pytest_cmd = f"{python} -m pytest -q -p no:cacheprovider -p no:randomly test_mtls.py"
    script = HARNESS + "\n".join(
        ln.replace("pytest", pytest_cmd).replace("python -m fxpay.sandbox", f"{sys.executable} -m fxpay.sandbox") for ln in lines
    )
    assert "--tls --client-auth" in script
    env = {k: v for k, v in os.environ.items() if not k.startswith("FXPAY_")}
    r = subprocess.run([bash, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "1 passed" in r.stdout, r.stdout[-3000:]
