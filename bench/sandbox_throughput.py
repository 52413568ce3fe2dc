#!/usr/bin/env python3
"""Throughput of the sandbox's GET /v1/payments/quotes/{id}, measured with wrk.

    python bench/sandbox_throughput.py            # wrk -t2 -c64 -d10s
    python bench/sandbox_throughput.py --quick    # wrk -t2 -c64 -d3s
    python bench/sandbox_throughput.py --check    # exit 1 when below the target

Builds nothing: it runs the installed fxpay (``python -m fxpay.sandbox --port 0``) in a
subprocess, gets a payments token and creates one quote with httpx, then points wrk at the
quote. wrk and the sandbox share the machine's cores, so the figure is a lower bound of what
the sandbox alone could serve. Build fxpay with ``maturin develop --release`` for the number
that counts; a debug build is several times slower.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time

import httpx

TARGET = 20_000.0


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fxpay_build() -> str:
    """The installed extension module and its size (a debug build is about 100 MB, release about 8)."""
    try:
        import fxpay._fxpay as core

        path = core.__file__ or "?"
        return f"{path} ({os.path.getsize(path) / 1e6:.1f} MB)"
    except Exception as e:
        return f"unknown ({e})"


def start_sandbox() -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fxpay.sandbox", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    env: dict[str, str] = {}
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    while "FXPAY_PASSWORD" not in env:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"the sandbox exited early (code {proc.poll()})")
        if "=" in line:
            k, v = line.strip().split("=", 1)
            env[k] = v
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the sandbox did not print its settings in 30 s")
    return proc, env


def token_and_quote(env: dict[str, str]) -> tuple[str, str]:
    base = env["FXPAY_BASE_URL"]
    with httpx.Client(base_url=base, timeout=10, trust_env=False) as c:
        r = c.post(
            "/v1/oauth/token",
            data={
                "grant_type": "client_credentials",
                "client_id": env["FXPAY_CLIENT_ID"],
                "client_secret": env["FXPAY_CLIENT_SECRET"],
                "scope": "payments",
            },
        )
        r.raise_for_status()
        token = r.json()["access_token"]
        r = c.post(
            "/v1/payments/quotes",
            json={"buyCurrency": "GBP", "buyAmount": 1000, "sellCurrency": "USD", "beneficiaries": 1},
            headers={"Authorization": f"Bearer {token}"},
        )
        r.raise_for_status()
        quote_id = r.json()["id"]
        r = c.get(f"/v1/payments/quotes/{quote_id}", headers={"Authorization": f"Bearer {token}"})
        r.raise_for_status()
    return token, quote_id


def parse_rps(output: str) -> float:
    m = re.search(r"^Requests/sec:\s*([0-9.]+)", output, re.MULTILINE)
    if not m:
        raise SystemExit(f"no Requests/sec in wrk's output:\n{output}")
    return float(m.group(1))


def non_2xx(output: str) -> int:
    m = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", output)
    return int(m.group(1)) if m else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="3 s instead of 10 s")
    p.add_argument("--check", action="store_true", help=f"exit 1 when below {TARGET:,.0f} requests/s")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--wrk", default=shutil.which("wrk") or "/usr/bin/wrk")
    args = p.parse_args(argv)
    if not os.path.exists(args.wrk):
        raise SystemExit("wrk is not installed")

    duration = "3s" if args.quick else "10s"
    proc, env = start_sandbox()
    try:
        token, quote_id = token_and_quote(env)
        url = f"{env['FXPAY_BASE_URL']}/v1/payments/quotes/{quote_id}"
        auth = f"Authorization: Bearer {token}"
        # a short warm-up (connections, caches, the runtime's threads), then the measured run
        subprocess.run([args.wrk, "-t2", "-c16", "-d1s", "-H", auth, url], capture_output=True, check=True)
        cmd = [args.wrk, f"-t{args.threads}", f"-c{args.connections}", f"-d{duration}", "-H", auth, url]
        shown = " ".join(cmd).replace(token, "<token>")
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()

    rps = parse_rps(out)
    errors = non_2xx(out)
    print(out.rstrip())
    print()
    print(f"command:   {shown}")
    print(f"cpu:       {cpu_model()} ({os.cpu_count()} logical CPUs, shared by wrk and the sandbox)")
    print(f"load avg:  {' '.join(f'{x:.2f}' for x in os.getloadavg())} (at the end of the run)")
    print(f"fxpay:     {fxpay_build()}")
    print(f"result:    {rps:,.0f} requests/s (target {TARGET:,.0f}){'' if rps >= TARGET else '  BELOW TARGET'}")
    if errors:
        print(f"error:     {errors} non-2xx answers: the benchmark is not measuring successful reads")
        return 1
    if args.check and rps < TARGET:
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
