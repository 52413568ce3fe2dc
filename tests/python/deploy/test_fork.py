"""Fork safety with real processes: import starts nothing; forked children use clients made
before the fork (blocking and awaitable) and new ones; a child's exit never delays the parent.

Each scenario runs tests/python/deploy/apps/fork_app.py in its own interpreter against the
test's sandbox, so the forking process is a plain program (not pytest) and its children may
exit however they like.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

APP = Path(__file__).parent / "apps" / "fork_app.py"
# Far above what any scenario needs (a few seconds), far below the 30 s a stuck call waits.
RUN_TIMEOUT = 120


def sandbox_env(sandbox: Any) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        FXPAY_BASE_URL=sandbox.base_url,
        FXPAY_CLIENT_ID=sandbox.client_id,
        FXPAY_CLIENT_SECRET=sandbox.client_secret,
    )
    return env


def run_app(sandbox: Any, *args: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, str(APP), *args],
        env={**sandbox_env(sandbox), **(env or {})},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_import_starts_no_thread_runtime_or_socket() -> None:
    code = (
        "import os\n"
        "def state():\n"
        "    fds = []\n"
        "    for fd in os.listdir('/proc/self/fd'):\n"
        "        try:\n"
        "            fds.append(os.readlink(f'/proc/self/fd/{fd}'))\n"
        "        except OSError:\n"
        "            pass\n"
        "    kinds = sorted(k.split(':')[0] for k in fds if k.startswith(('socket:', 'anon_inode:')))\n"
        "    return len(os.listdir('/proc/self/task')), kinds\n"
        "before = state()\n"
        "import fxpay, fxpay.testing, fxpay.webhooks\n"
        "print(before, state())\n"
    )
    if not Path("/proc/self/task").is_dir():
        pytest.skip("needs /proc")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    before, after = out.stdout.strip().split(") (")
    # Same thread count and no new socket or epoll/eventfd descriptor.
    assert before + ")" == "(" + after, out.stdout


def test_multiprocessing_fork_pool_uses_module_level_and_new_clients(fxpay_sandbox: Any) -> None:
    out, _ = run_app(fxpay_sandbox, "pool")
    children = out["children"]
    assert len(children) == 6
    for i, child in enumerate(children):
        assert child["pid"] != out["parent"]
        assert child["blocking"], child
        assert child["awaitable"], child
        assert child["fresh"], child
        assert child["created"] == f"{i + 1}.25"
    assert out["parent_after"] is True
    if not getattr(fxpay_sandbox, "remote", False):
        # The module-level client's cached token went across the forks (one token), and each
        # child's new client got its own (six).
        assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 7


@pytest.mark.parametrize("mode", ["sys.exit", "os._exit", "raise"])
def test_parent_is_not_delayed_by_a_child_exit(fxpay_sandbox: Any, mode: str) -> None:
    # The client's timeout is 30 s: a call that lost its connection's registration waits it
    # out. A healthy call on loopback takes milliseconds; 3 s leaves a wide margin.
    out, stderr = run_app(fxpay_sandbox, "exit", mode, "4")
    for r in out["rounds"]:
        assert r["blocking_s"] < 3.0, r
        assert r["awaitable_s"] < 3.0, r
        assert r["blocking"], r
        assert r["awaitable"], r
        assert r["exit_code"] == (1 if mode == "raise" else 0), (r, stderr)
    if mode == "raise":
        assert stderr.count("calls ok: True") == 4, stderr


def test_fork_while_another_thread_has_calls_in_flight(fxpay_sandbox: Any) -> None:
    out, _ = run_app(fxpay_sandbox, "inflight")
    assert out["exit_codes"] == [0] * 5, out
    assert out["parent_errors"] == [], out
    assert out["parent_calls"] > 0


def test_fork_while_another_thread_has_calls_in_flight_over_tls() -> None:
    # The TLS settings are shared by every pool of a process (crates/fxpay-core/src/tls.rs),
    # and a child builds its own: a thread of the parent may hold their session cache's lock
    # at the fork. The children's calls here are their first TLS handshakes.
    from fxpay.testing import Sandbox

    with Sandbox(tls=True) as sb:
        assert sb.base_url.startswith("https://")
        assert sb.ca_bundle is not None
        out, _ = run_app(sb, "inflight", env={"SSL_CERT_FILE": sb.ca_bundle})
    assert out["exit_codes"] == [0] * 5, out
    assert out["parent_errors"] == [], out
    assert out["parent_calls"] > 0


def test_fork_while_another_thread_renews_the_token(fxpay_sandbox: Any) -> None:
    # The parent's renewal holds the single-flight lock at the fork; the child must not wait
    # for a task that does not exist in it (it would be killed by SIGALRM after 20 s).
    out, _ = run_app(fxpay_sandbox, "renewing")
    assert out["exit_code"] == 0, out
    assert out["child_s"] < 10.0, out


def test_a_child_of_the_sandbox_process_calls_it_but_cannot_drive_it(fxpay_sandbox: Any) -> None:
    out, _ = run_app(fxpay_sandbox, "sandbox")
    child = out["child"]
    assert child.get("call") is True, child
    assert child.get("new_client") is True, child
    assert child["stats"].startswith("ConfigurationError: "), child
    assert "parent process" in child["stats"]
    assert out["exit_code"] == 0
    # The child's close() and exit left the parent's sandbox serving, without delay.
    assert out["parent_after"] is True
    assert out["after_s"] < 3.0, out


def test_awaitables_on_a_loop_without_add_reader_work_before_and_after_a_fork(fxpay_sandbox: Any) -> None:
    out, _ = run_app(fxpay_sandbox, "fallback")
    assert out == {"parent_before": True, "child_exit_code": 0, "parent_after": True}, out
