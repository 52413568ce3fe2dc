from __future__ import annotations

import fxpay
import pytest


def make_beneficiary(currency: str = "AUD", **overrides: object) -> fxpay.Beneficiary:
    address = fxpay.Address(
        address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU"
    )
    fields = dict(
        currency=currency,
        name="Acme Pty Ltd",
        classification="Business",
        payment_reason="Invoice 42",
        bank_details=fxpay.BankDetails(
            bank_name="Bank of Sydney",
            bank_branch_name="George St",
            branch_code="062000",
            account="12345678",
            bank_address=address,
        ),
        address=address,
    )
    fields.update(overrides)
    return fxpay.Beneficiary(**fields)  # type: ignore[arg-type]


@pytest.fixture
def beneficiary() -> fxpay.Beneficiary:
    return make_beneficiary()
