"""How many DealCreated notifications a Redis outage loses or runs twice (issue 23 item 8).

A FastAPI receiver with a RedisSeenSet on a real redis-server receives the notifications the
sandbox sends for N spot deals booked over about 3 s. Half a second in, Redis stops for
OUTAGE seconds and starts again on the same port: with ``--appendonly no`` it comes back
empty (a restart without persistence), with ``--appendonly yes`` (AOF) it reloads what it
had. When every delivery is over, each event is delivered once more (the body, nonce and URL
the sandbox sent: the duplicate an at-least-once sender may send at any time), and the script counts:

- lost: events whose ``on_event`` never ran (every attempt of the sender failed);
- twice: events whose ``on_event`` ran more than once.

``--old`` answers a seen-set failure as before the fix (500, no ``Retry-After``).

    python bench/seen_outage.py [--n 150] [--outage 2] [--aof] [--old]
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import socket
import subprocess
import threading
import time
from decimal import Decimal
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx

import fxpay
import fxpay.contrib.receiver as receive
from fxpay.seen import RedisSeenSet
from fxpay.testing import Sandbox


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Redis:
    def __init__(self, workdir: Path, aof: bool) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise SystemExit("redis-server is not installed")
        self.argv = [exe, "--port", str(free_port()), "--bind", "127.0.0.1", "--save", ""]
        self.argv += ["--appendonly", "yes" if aof else "no", "--appendfsync", "always", "--dir", str(workdir)]
        self.port = int(self.argv[2])
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.01)
        raise SystemExit("redis-server did not start")

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.kill()  # a crash: nothing is saved on the way out
        self.proc.wait(10)


def serve(app: Any) -> tuple[str, Any, threading.Thread]:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread


def run(n: int, outage: float, aof: bool, old: bool) -> dict[str, Any]:
    import logging

    from fastapi import FastAPI

    from fxpay.contrib.fastapi import deal_created_router

    logging.getLogger("fxpay.webhooks").setLevel(logging.CRITICAL)
    if old:
        receive.SEEN_UNAVAILABLE = (500, {"ok": False, "error": "the seen-set failed"})
    calls: collections.Counter[str] = collections.Counter()
    nonces: dict[str, str] = {}
    lock = threading.Lock()

    def on_event(ev: fxpay.DealCreated) -> None:
        with lock:
            calls[ev.process_id] += 1

    def nonce_for(pid: str) -> str | None:
        with lock:
            return nonces.get(pid)

    with TemporaryDirectory() as tmp, Sandbox() as sb:
        redis = Redis(Path(tmp), aof)
        redis.start()
        seen = RedisSeenSet(url=f"redis://127.0.0.1:{redis.port}/0", socket_timeout=0.5)
        app = FastAPI()
        app.include_router(deal_created_router(path="/hook", nonce_for=nonce_for, on_event=on_event, seen=seen))
        base, server, thread = serve(app)
        c = sb.client()
        address = fxpay.Address("1 George St", "Sydney", "NSW", "2000", "AU")
        bank = fxpay.BankDetails("Bank of Sydney", "George St", "062000", "12345678", address)
        bid = c.create_beneficiary(fxpay.Beneficiary("AUD", "Acme Pty Ltd", "Business", "Invoice 42", bank, address))
        quotes = []
        for _ in range(n):
            qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
            quotes.append((qid, c.get_quote(qid).sell_amount))
        gap = 3.0 / n
        start = time.monotonic()
        down_at, up_at = start + 0.5, start + 0.5 + outage
        state = "up"
        pids = []
        for i, (qid, amount) in enumerate(quotes):
            while time.monotonic() < start + i * gap:
                time.sleep(0.001)
            now = time.monotonic()
            if state == "up" and now >= down_at:
                redis.stop()
                state = "down"
            if state == "down" and now >= up_at:
                redis.start()
                state = "back"
            with lock:
                s = c.create_spot_deal(
                    quote_id=qid,
                    funding_source="Own account",
                    beneficiaries=[fxpay.DealBeneficiary(bid, Decimal(amount), "r", "ref")],
                    callback_url=f"{base}/hook",
                )
                nonces[s.process_id] = s.callback_nonce or ""
            pids.append(s.process_id)
        if state == "down":
            while time.monotonic() < up_at:
                time.sleep(0.01)
            redis.start()
        elif state == "up":
            raise SystemExit("the outage did not start: raise --n or lower the pace")

        # Every delivery (with its retries) is over: its last attempt is recorded.
        def settled() -> bool:
            last: dict[str, dict[str, Any]] = {}
            for d in sb.deliveries():
                last[d["processId"]] = d
            return len(last) == n and all(
                (d["status"] is not None and 200 <= d["status"] < 300) or d["attempt"] == 4 for d in last.values()
            )

        deadline = time.monotonic() + 120
        while not settled() and time.monotonic() < deadline:
            time.sleep(0.2)
        lost = sum(1 for p in pids if calls[p] == 0)
        first: dict[str, dict[str, Any]] = {}
        for d in sb.deliveries():
            first.setdefault(d["processId"], d)
        with httpx.Client(timeout=30, trust_env=False) as http:
            for p in pids:
                d = first[p]  # the same body, nonce and URL again
                headers = {"content-type": "application/json", "callback-nonce": d["nonce"]}
                http.post(d["url"], content=json.dumps(d["body"]), headers=headers)
        twice = sum(1 for p in pids if calls[p] > 1)
        server.should_exit = True
        thread.join(10)
        redis.stop()
        return {
            "n": n,
            "outage_s": outage,
            "aof": aof,
            "answer": "500 (old)" if old else "503 + Retry-After",
            "lost": lost,
            "twice_after_one_redelivery": twice,
            "elapsed_s": round(time.monotonic() - start, 1),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--outage", type=float, default=2.0)
    ap.add_argument("--aof", action="store_true", help="Redis with appendonly yes (persistence)")
    ap.add_argument("--old", action="store_true", help="answer a seen-set failure with 500, as before the fix")
    a = ap.parse_args()
    print(run(a.n, a.outage, a.aof, a.old))


if __name__ == "__main__":
    main()
