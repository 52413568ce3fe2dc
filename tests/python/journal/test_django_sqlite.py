"""Issue 54 item 10: the Django journal on Django's default database. A project whose
databases are SQLite only (``startproject``'s default) with ``fxpay.contrib.django_journal``
installed is refused at ``migrate`` (a system check, ``fxpay_journal.E001``) with the reason
and what to use instead, before anything is migrated: never a ``migrate`` that succeeds and
then a journal that refuses every keyed call. A real project on SQLite files, ``manage.py``
in a subprocess, as a user runs it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import need

SETTINGS = """
SECRET_KEY = "test-only"
INSTALLED_APPS = {apps!r}
USE_TZ = True
DATABASES = {{
    "default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}},
    "other": {{"ENGINE": "django.db.backends.sqlite3", "NAME": "other.sqlite3"}},
}}
"""

MANAGE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
"""

JOURNAL_APP = "fxpay.contrib.django_journal"


def project(folder: Path, apps: list[str]) -> Path:
    need("django")
    (folder / "settings.py").write_text(SETTINGS.format(apps=apps))
    (folder / "manage.py").write_text(MANAGE)
    return folder


def manage(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=folder, capture_output=True, text=True, timeout=120)


def tables(path: Path) -> set[str]:
    if not path.exists():
        return set()
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


@pytest.mark.parametrize("database", ["default", "other"])
def test_migrate_on_sqlite_is_refused_with_the_reason(tmp_path: Path, database: str) -> None:
    folder = project(tmp_path, ["django.contrib.contenttypes", JOURNAL_APP])
    r = manage(folder, "migrate", "--database", database)
    assert r.returncode != 0, r.stdout
    text = r.stderr
    assert "fxpay_journal.E001" in text, text
    assert "PostgreSQL" in text, text
    assert "django.db.backends.sqlite3" in text, text
    assert "SqliteJournal" in text, text  # what to use instead
    assert "Traceback" not in text, text
    # Refused before anything was migrated.
    assert "django_migrations" not in tables(folder / f"{'db' if database == 'default' else 'other'}.sqlite3")


def test_check_says_so_too_and_a_project_without_the_app_migrates(tmp_path: Path) -> None:
    folder = project(tmp_path, ["django.contrib.contenttypes", JOURNAL_APP])
    r = manage(folder, "check", "--database", "default")
    assert r.returncode != 0
    assert "fxpay_journal.E001" in r.stderr, r.stderr
    (tmp_path / "plain").mkdir()
    plain = project(tmp_path / "plain", ["django.contrib.contenttypes"])
    r = manage(plain, "migrate")
    assert r.returncode == 0, r.stderr
    assert "django_content_type" in tables(plain / "db.sqlite3")


def test_the_journal_on_sqlite_says_why_and_what_to_use_instead(tmp_path: Path) -> None:
    folder = project(tmp_path, ["django.contrib.contenttypes", JOURNAL_APP])
    code = (
        "import django; django.setup()\n"
        "from fxpay.contrib.django import journal\n"
        "try:\n    journal()\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env={"DJANGO_SETTINGS_MODULE": "settings", "PYTHONPATH": str(folder), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ConfigurationError"), r.stdout
    assert "django.db.backends.sqlite3" in r.stdout
    assert "SqliteJournal" in r.stdout
