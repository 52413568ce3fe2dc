"""Every payments call, blocking and async, against the local sandbox over real loopback HTTP."""

from __future__ import annotations

import pickle
from decimal import Decimal

import pytest

import fxpay

from conftest import make_beneficiary


def book(c: fxpay.Client, beneficiary: fxpay.Beneficiary, amount: object = "1000.00") -> tuple[fxpay.Quote, fxpay.Deal]:
    qid = c.create_quote(buy_currency="USD", buy_amount=amount, sell_currency="AUD")
    q = c.get_quote(qid)
    bid = c.create_beneficiary(beneficiary)
    deal = c.create_deal(
        quote_id=qid,
        funding_source="Own account",
        beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount, "Invoice 42", "INV-42")],
    )
    return q, deal


def test_quote_round_trip_is_exact(fxpay_client: fxpay.Client) -> None:
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=Decimal("1000.10"), sell_currency="AUD")
    q = fxpay_client.get_quote(qid)
    assert q.id == qid
    assert (q.buy_currency, q.sell_currency) == ("USD", "AUD")
    assert q.buy_amount == Decimal("1000.10")
    for v in (q.buy_amount, q.sell_amount, q.customer_rate, q.inverse_customer_rate, q.fee):
        assert isinstance(v, Decimal)
    # sellAmount is buyAmount at customerRate, rounded to the sell currency's cents.
    assert q.sell_amount == (q.buy_amount * q.customer_rate).quantize(Decimal("0.01"))
    assert q.raw["sellAmount"] == q.sell_amount
    assert q.freebies.total == q.freebies.claimed + q.freebies.remaining


async def test_quote_round_trip_async(fxpay_client: fxpay.Client) -> None:
    qid = await fxpay_client.create_quote_async(buy_currency="EUR", buy_amount=250, sell_currency="JPY")
    q = await fxpay_client.get_quote_async(qid)
    assert q.sell_amount == q.sell_amount.to_integral_value(), "JPY has no minor units"
    assert q.buy_amount == Decimal(250)


def test_float_amount_goes_through_its_shortest_repr(fxpay_client: fxpay.Client) -> None:
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=1000.1, sell_currency="EUR")
    assert str(fxpay_client.get_quote(qid).buy_amount) == "1000.1"  # not 1000.1000000000000227...


def test_deal_is_booked_then_paid(fxpay_sandbox, fxpay_client, beneficiary) -> None:  # type: ignore[no-untyped-def]
    q, deal = book(fxpay_client, beneficiary)
    assert deal.quote_id == q.id
    assert deal.beneficiaries[0].amount == q.sell_amount
    assert fxpay_sandbox.deal_status(deal.deal_id) == "Booked"
    fxpay_sandbox.advance(86399)
    assert fxpay_sandbox.deal_status(deal.deal_id) == "Booked"
    fxpay_sandbox.advance(2)
    assert fxpay_sandbox.deal_status(deal.deal_id) == "Paid"
    booked = [d for d in fxpay_sandbox.deals() if d["dealId"] == deal.deal_id]
    assert len(booked) == 1


async def test_deal_async(fxpay_sandbox, fxpay_client, beneficiary) -> None:  # type: ignore[no-untyped-def]
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount="500", sell_currency="AUD")
    q = await fxpay_client.get_quote_async(qid)
    bid = await fxpay_client.create_beneficiary_async(beneficiary)
    deal = await fxpay_client.create_deal_async(
        quote_id=qid,
        funding_source="Direct Debit",
        channel="FXSecure",
        beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount, "r", "ref")],
    )
    assert deal.channel == "FXSecure"
    assert [d["dealId"] for d in fxpay_sandbox.deals()] == [deal.deal_id]


def test_spot_deal_generates_a_nonce(fxpay_client, beneficiary) -> None:  # type: ignore[no-untyped-def]
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    q = fxpay_client.get_quote(qid)
    bid = fxpay_client.create_beneficiary(beneficiary)
    spot = fxpay_client.create_spot_deal(
        quote_id=qid,
        funding_source="Own account",
        beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount, "r", "ref")],
        callback_url="http://127.0.0.1:9/hook",
    )
    assert spot.process_id
    assert spot.callback_nonce is not None
    assert len(spot.callback_nonce) >= 22
    assert spot.callback_nonce not in repr(spot)


async def test_spot_deal_async_keeps_a_given_nonce(fxpay_client, beneficiary) -> None:  # type: ignore[no-untyped-def]
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    q = await fxpay_client.get_quote_async(qid)
    bid = await fxpay_client.create_beneficiary_async(beneficiary)
    spot = await fxpay_client.create_spot_deal_async(
        quote_id=qid,
        funding_source="Own account",
        beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount, "r", "ref")],
        callback_url="http://127.0.0.1:9/hook",
        callback_nonce="my-nonce-123",
    )
    assert spot.callback_nonce == "my-nonce-123"


def test_service_validation_errors_are_typed(fxpay_client) -> None:  # type: ignore[no-untyped-def]
    # A classification the service does not know passes the client's checks and is refused there.
    with pytest.raises(fxpay.BadRequestError) as ei:
        fxpay_client.create_beneficiary(make_beneficiary(classification="Alien Entity"))
    assert ei.value.status == 400
    assert [e.field_name for e in ei.value.errors] == ["Classification"]
    assert ei.value.errors[0].layer is not None


def test_unknown_quote_is_not_found(fxpay_client) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(fxpay.NotFoundError) as ei:
        fxpay_client.get_quote("00000000-0000-4000-8000-000000000000")
    assert ei.value.status == 404


def test_deal_amounts_must_add_up(fxpay_client, beneficiary) -> None:  # type: ignore[no-untyped-def]
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    q = fxpay_client.get_quote(qid)
    bid = fxpay_client.create_beneficiary(beneficiary)
    with pytest.raises(fxpay.BadRequestError) as ei:
        fxpay_client.create_deal(
            quote_id=qid,
            funding_source="Own account",
            beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount + Decimal("0.01"), "r", "ref")],
        )
    assert ei.value.errors, ei.value.body
    e = ei.value.errors[0]
    assert e.layer
    assert e.component
    assert isinstance(e.number, int)
    assert e.error_code == f"{e.layer}:{e.component}:{e.number}"


def test_models_are_immutable_comparable_and_pickle(fxpay_client, beneficiary) -> None:  # type: ignore[no-untyped-def]
    q, deal = book(fxpay_client, beneficiary)
    again = fxpay_client.get_quote(q.id)
    assert again == q
    assert pickle.loads(pickle.dumps(q)) == q
    assert pickle.loads(pickle.dumps(deal)) == deal
    with pytest.raises(AttributeError):
        q.buy_amount = Decimal(1)  # type: ignore[misc]
    assert q.to_dict()["buyAmount"] == q.buy_amount
    assert "Quote(" in repr(q)
    assert "raw" not in repr(q)
    assert isinstance(q.raw, dict)
    assert q.raw["buyCurrency"] == "USD"
