"""A Django project under ``gunicorn --preload -w 2`` paying with ``fxpay.contrib.django.journal()``:
``manage.py migrate``, 50 keyed deals each asked for twice (the sandbox holds 50), then a key
made unknown by a lost answer, listed and settled with ``manage.py fxpay_unknown``.

The master imports the app, and its journal connects there, before the workers are forked:
each worker must make its own connection."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from conftest import make_beneficiary, need
from postgres_support import PostgresServer, postgres_server

__all__ = ["postgres_server"]  # a fixture, imported for the tests below

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="gunicorn needs fork")

DEALS = "POST /v1/payments/deals"

SETTINGS = """
SECRET_KEY = "test-only"
ALLOWED_HOSTS = ["127.0.0.1"]
INSTALLED_APPS = ["fxpay.contrib.django_journal"]
ROOT_URLCONF = "payapp"
MIDDLEWARE = []
USE_TZ = True
DATABASES = {{"default": {{"ENGINE": "django.db.backends.postgresql", "NAME": {name!r}, "USER": "postgres",
                          "HOST": "127.0.0.1", "PORT": {port!r}}}}}
"""

WSGI = """
import os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
from django.core.wsgi import get_wsgi_application
application = get_wsgi_application()
import payapp
payapp.JOURNAL.get("made-in-the-master")  # the master connects before gunicorn forks
"""

PAYAPP = """
import os
import time
from pathlib import Path

import fxpay
from django.http import JsonResponse
from django.urls import path
from fxpay.contrib.django import journal

JOURNAL = journal()
CLIENT = fxpay.Client.from_env(journal=JOURNAL)


def meet():
    # Wait, up to 30 s, until the other worker is in this view too: a sync worker serves one
    # request at a time, so two requests that meet here were taken by two workers.
    Path(f"meet-{os.getpid()}").touch()
    deadline = time.monotonic() + 30
    while len(list(Path().glob("meet-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)


def pay(request):
    q = request.GET
    if "meet" in q:
        meet()
    try:
        deal = CLIENT.create_deal(
            quote_id=q["quote_id"],
            funding_source="Own account",
            beneficiaries=[fxpay.DealBeneficiary(q["beneficiary_id"], q["amount"], "invoice", q["key"])],
            idempotency_key=q["key"],
        )
    except fxpay.OutcomeUnknownError:
        return JsonResponse({"state": "unknown", "pid": os.getpid()}, status=409)
    except fxpay.InProgressError:
        return JsonResponse({"state": "in progress", "pid": os.getpid()}, status=409)
    return JsonResponse({"state": "done", "deal_id": deal.deal_id, "pid": os.getpid()})


urlpatterns = [path("pay", pay)]
"""

MANAGE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def site(fxpay_sandbox: Any, postgres_server: PostgresServer, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    need("django")
    need("gunicorn")
    psycopg = need("psycopg")
    dbname = f"g{time.monotonic_ns()}"
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    (tmp_path / "settings.py").write_text(SETTINGS.format(name=dbname, port=str(postgres_server.port)))
    (tmp_path / "wsgi.py").write_text(WSGI)
    (tmp_path / "payapp.py").write_text(PAYAPP)
    (tmp_path / "manage.py").write_text(MANAGE)
    env = dict(
        os.environ,
        FXPAY_BASE_URL=fxpay_sandbox.base_url,
        FXPAY_CLIENT_ID=fxpay_sandbox.client_id,
        FXPAY_CLIENT_SECRET=fxpay_sandbox.client_secret,
    )
    r = subprocess.run([sys.executable, "manage.py", "migrate"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    port = free_port()
    log = tmp_path / "gunicorn.log"
    argv = [sys.executable, "-m", "gunicorn", "--preload", "-w", "2", "--bind", f"127.0.0.1:{port}", "--chdir", str(tmp_path)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*argv, "wsgi:application"], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
    try:
        yield base, tmp_path
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        print(log.read_text()[-2000:])
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{dbname}" WITH (FORCE)')


def post(base: str, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(f"{base}/pay?{urllib.parse.urlencode(params)}", method="POST", data=b"")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_gunicorn_workers_pay_50_keyed_deals_once_each(fxpay_sandbox: Any, site: tuple[str, Path]) -> None:
    base, folder = site
    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
        jobs = []
        for i in range(51):
            qid = c.create_quote(buy_currency="USD", buy_amount=Decimal(10 + i), sell_currency="AUD")
            jobs.append({"key": f"inv-{i}/deal", "quote_id": qid, "beneficiary_id": bid, "amount": str(c.get_quote(qid).sell_amount)})
    deals, last = jobs[:50], jobs[50]
    # The first two meet in the view, so both workers pay whatever the kernel's accept order.
    with ThreadPoolExecutor(8) as pool:
        met = list(pool.map(lambda j: post(base, {**j, "meet": "1"}), deals[:2]))
        first = met + list(pool.map(lambda j: post(base, j), deals[2:]))
    assert [s for s, _ in first] == [200] * 50, first
    again = [post(base, j) for j in deals]
    assert [b["deal_id"] for _, b in again] == [b["deal_id"] for _, b in first]
    assert len(fxpay_sandbox.deals()) == 50
    assert fxpay_sandbox.stats()["paths"][DEALS] == 50
    assert len({b["pid"] for _, b in met}) == 2, met  # both workers paid
    # A lost answer: the key is unknown, listed by manage.py fxpay_unknown, and settled.
    fxpay_sandbox.drop_next(DEALS, after_processing=True)
    for _ in range(2):  # the second sends nothing
        status, body = post(base, last)
        assert (status, body["state"]) == (409, "unknown")
    assert fxpay_sandbox.stats()["paths"][DEALS] == 51
    manage = [sys.executable, "manage.py", "fxpay_unknown"]
    env = dict(os.environ, FXPAY_BASE_URL=fxpay_sandbox.base_url, FXPAY_CLIENT_ID="x", FXPAY_CLIENT_SECRET="x")  # the URLconf's client
    listed = subprocess.run(manage, cwd=folder, env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    assert [line.split("\t")[0] for line in listed.splitlines()] == [last["key"]]
    booked = {d["dealId"] for d in fxpay_sandbox.deals()} - {b["deal_id"] for _, b in first}
    assert len(booked) == 1
    deal_id = booked.pop()
    subprocess.run(
        [*manage, "--resolve", last["key"], "--result", deal_id], cwd=folder, env=env, capture_output=True, timeout=60, check=True
    )
    status, body = post(base, last)
    assert (status, body["deal_id"]) == (200, deal_id)
    assert fxpay_sandbox.stats()["paths"][DEALS] == 51
