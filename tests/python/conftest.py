from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import fxpay
import pytest

T = TypeVar("T")


def all_at_once(n: int, call: Callable[[], T]) -> list[T]:
    """Runs ``call`` on ``n`` threads released together; returns the results, raises the first error."""
    barrier = threading.Barrier(n)
    results: list[T] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            results.append(call())
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


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
