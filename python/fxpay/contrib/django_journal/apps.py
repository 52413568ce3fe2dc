"""The app's configuration."""

from __future__ import annotations

from django.apps import AppConfig


class FxpayJournalConfig(AppConfig):
    name = "fxpay.contrib.django_journal"
    label = "fxpay_journal"
    verbose_name = "fxpay idempotency journal"
