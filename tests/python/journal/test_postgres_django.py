"""The journal in a Django project's PostgreSQL: ``fxpay.contrib.django.journal()``, the
migration of ``fxpay.contrib.django_journal`` and ``manage.py fxpay_unknown``, run as a user
runs them (a project of its own, ``manage.py`` in a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import need
from journal_support import deal_args, requests_to
from postgres_support import PostgresServer, postgres_server

__all__ = ["postgres_server"]  # a fixture, imported for the tests below

DEALS = "POST /v1/payments/deals"

SETTINGS = """
SECRET_KEY = "test-only"
INSTALLED_APPS = ["fxpay.contrib.django_journal"]
USE_TZ = True
DATABASES = {{
    "default": {{
        "ENGINE": "django.db.backends.postgresql",
        "NAME": {name!r},
        "USER": "postgres",
        "HOST": "127.0.0.1",
        "PORT": {port!r},
        "OPTIONS": {{"connect_timeout": 5, "isolation_level": 1}},
    }},
    "lite": {{"ENGINE": "django.db.backends.sqlite3", "NAME": "lite.sqlite3"}},
}}
"""

MANAGE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
"""


class Project:
    def __init__(self, folder: Path, server: PostgresServer, dbname: str) -> None:
        self.folder = folder
        self.conninfo = f"host=127.0.0.1 port={server.port} user=postgres dbname={dbname}"
        (folder / "settings.py").write_text(SETTINGS.format(name=dbname, port=str(server.port)))
        (folder / "manage.py").write_text(MANAGE)

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([sys.executable, "manage.py", *args], cwd=self.folder, capture_output=True, text=True, timeout=120)
        if check:
            assert r.returncode == 0, f"manage.py {' '.join(args)}: {r.stdout}{r.stderr}"
        return r


@pytest.fixture
def project(postgres_server: PostgresServer, tmp_path: Path) -> Iterator[Project]:
    need("django")
    psycopg = need("psycopg")
    dbname = f"d{time.monotonic_ns()}"
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    yield Project(tmp_path, postgres_server, dbname)
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{dbname}" WITH (FORCE)')


def test_migrate_makes_the_table_and_fxpay_unknown_lists_and_settles_keys(fxpay_sandbox: Any, project: Project) -> None:
    project.manage("migrate")
    project.manage("migrate", "--database", "lite")  # another engine: the migration does nothing there
    journal = fxpay.PostgresJournal(project.conninfo)  # the table the migration made
    with fxpay_sandbox.client(journal=journal) as c:
        args = {key: deal_args(c) for key in ("created", "not-created")}
        for key in args:
            fxpay_sandbox.drop_next(DEALS, after_processing=True)
            with pytest.raises(fxpay.OutcomeUnknownError):
                c.create_deal(**args[key], idempotency_key=key)
        booked = [d["dealId"] for d in fxpay_sandbox.deals()]
        listed = project.manage("fxpay_unknown").stdout.splitlines()
        assert [line.split("\t")[:2] for line in listed] == [["created", "create_deal"], ["not-created", "create_deal"]]
        out = project.manage("fxpay_unknown", "--resolve", "created", "--result", booked[0]).stdout
        assert out.split() == ["created", "done", booked[0]]
        assert project.manage("fxpay_unknown", "--resolve", "not-created", "--none").stdout.split() == ["not-created", "released"]
        r = project.manage("fxpay_unknown")
        assert (r.stdout, r.stderr.strip()) == ("", "no unknown keys")
        # Settled: the first key returns its deal without sending, the second sends anew.
        assert c.create_deal(**args["created"], idempotency_key="created").deal_id == booked[0]
        assert requests_to(fxpay_sandbox, DEALS) == 2
    for bad, said in (
        (["--resolve", "created"], "--result ID"),
        (["--result", "x"], "--resolve KEY"),
        (["--resolve", "never-used", "--none"], "never-used"),
        (["--resolve", "k", "--result", "x", "--none"], "not allowed with"),
    ):
        r = project.manage("fxpay_unknown", *bad, check=False)
        assert r.returncode != 0
        assert said in r.stderr, r.stderr


JOURNAL_SCRIPT = """
import json, sys
from django.db import transaction
import fxpay
from fxpay.contrib.django import journal

out = {}
j = journal()
out["type"] = type(j).__name__
with fxpay.Client(sys.argv[1], sys.argv[2], base_url=sys.argv[3], journal=j) as c:
    try:
        with transaction.atomic():  # the application's transaction, rolled back after the call
            out["quote"] = c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="in-atomic")
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
out["kept"] = j.get("in-atomic").result
for using in ("lite", "nothing", 5):
    try:
        journal(using)
        out[str(using)] = "no error"
    except Exception as e:
        out[str(using)] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def test_journal_is_built_from_databases_and_refuses_other_engines(fxpay_sandbox: Any, project: Project) -> None:
    project.manage("migrate")
    (project.folder / "check.py").write_text(textwrap.dedent(JOURNAL_SCRIPT))
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "settings", "PYTHONPATH": str(project.folder)}
    code = "import django; django.setup(); import runpy; runpy.run_path('check.py', run_name='__main__')"
    r = subprocess.run(
        [sys.executable, "-c", code, fxpay_sandbox.client_id, fxpay_sandbox.client_secret, fxpay_sandbox.base_url],
        cwd=project.folder,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["type"] == "PostgresJournal"
    assert out["kept"] == out["quote"]  # the rolled-back atomic() did not undo the claim
    assert out["lite"].startswith("ConfigurationError")
    assert "django.db.backends.sqlite3" in out["lite"]
    assert out["nothing"].startswith("ConfigurationError")
    assert "'nothing'" in out["nothing"]
    assert out["5"].startswith("TypeError")
    assert "using" in out["5"]


def test_migrate_zero_refuses_while_keys_are_unsettled(fxpay_sandbox: Any, project: Project) -> None:
    project.manage("migrate")
    journal = fxpay.PostgresJournal(project.conninfo)
    with fxpay_sandbox.client(journal=journal) as c:
        fxpay_sandbox.drop_next("POST /v1/payments/quotes", after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError):
            c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD", idempotency_key="lost")
    r = project.manage("migrate", "fxpay_journal", "zero", check=False)
    assert r.returncode != 0
    assert "1 key(s) that are not settled" in r.stderr, r.stderr
    assert journal.get("lost") is not None  # nothing dropped
    assert journal.get("lost").state == "unknown"  # type: ignore[union-attr]
    forced = subprocess.run(
        [sys.executable, "manage.py", "migrate", "fxpay_journal", "zero"],
        cwd=project.folder,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FXPAY_JOURNAL_FORCE_DROP": "1"},
    )
    assert forced.returncode == 0, forced.stderr
    with pytest.raises(fxpay.JournalError):
        fxpay.PostgresJournal(project.conninfo).get("lost")
