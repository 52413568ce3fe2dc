"""The reader's Django urls (a stand-in): the DealCreated receiver, and the events it handled."""

from __future__ import annotations

from django.urls import path

import fxpay
from fxpay.contrib.django import deal_created_view

NONCE = "nonce-stored-with-the-spot-deal"
EVENTS: list[fxpay.DealCreated] = []

urlpatterns = [path("fxpay/deal-created", deal_created_view(nonce=NONCE, on_event=EVENTS.append))]
