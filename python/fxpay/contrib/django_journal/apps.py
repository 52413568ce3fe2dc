"""The app's configuration."""

from __future__ import annotations

from django.apps import AppConfig


class FxpayJournalConfig(AppConfig):
    name = "fxpay.contrib.django_journal"
    label = "fxpay_journal"
    verbose_name = "fxpay idempotency journal"

    def ready(self) -> None:
        # `migrate` refuses a project with no PostgreSQL for the journal (fxpay_journal.E001).
        from django.core import checks

        from ..django import check_journal_database

        checks.register(check_journal_database, checks.Tags.database)
