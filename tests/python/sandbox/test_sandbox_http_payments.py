"""Quotes, beneficiaries and deals of the sandbox over plain HTTP (httpx)."""

from __future__ import annotations

import re
import uuid
from decimal import Decimal
from typing import Any

import pytest

import fxpay

from sandbox_http_support import (
    FLAT_FEE,
    MINOR,
    Api,
    address,
    api,
    beneficiary_body,
    dec_json,
    errors_of,
    expected_price,
    http,
)

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
QUOTE_FIELDS = {
    "id",
    "buyCurrency",
    "buyAmount",
    "sellCurrency",
    "sellAmount",
    "customerRate",
    "inverseCustomerRate",
    "fee",
    "feeCurrency",
    "freebies",
    "beneficiaries",
    "createdAt",
}


def other_api(sb: Any, c: Any, name: str = "other-app") -> Api:
    sb.register_client(name, f"{name}-secret", [])
    return Api(c, name, f"{name}-secret")


# -- quotes -----------------------------------------------------------------------------------


def test_create_and_read_quote(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        r = a.post(
            "/v1/payments/quotes",
            {"buyCurrency": "GBP", "buyAmount": 1000.00, "sellCurrency": "USD", "beneficiaries": 1},
        )
        assert r.status_code == 201
        assert r.headers["content-type"] == "application/json"
        body = r.json()
        assert list(body) == ["id"]
        assert UUID_RE.fullmatch(body["id"])
        assert r.headers["location"] == f"/v1/payments/quotes/{body['id']}"
        g = a.get(f"/v1/payments/quotes/{body['id']}")
        assert g.status_code == 200
        quote = dec_json(g)
        assert set(quote) == QUOTE_FIELDS
        assert quote["id"] == body["id"]
        assert (quote["buyCurrency"], quote["sellCurrency"], quote["feeCurrency"]) == ("GBP", "USD", "GBP")
        # 1.27 * 0.995 = 1.26365; 1000 * 1.26365 = 1263.65; 1 / 1.26365 = 0.791358...
        assert quote["customerRate"] == Decimal("1.26365")
        assert quote["inverseCustomerRate"] == Decimal("0.791358")
        assert str(quote["sellAmount"]) == "1263.65"
        assert str(quote["buyAmount"]) == "1000.0"  # echoed as sent
        assert str(quote["fee"]) == "0.00"  # a freebie is left
        assert quote["freebies"] == {"total": 3, "claimed": 0, "remaining": 3}
        assert quote["beneficiaries"] == 1
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", quote["createdAt"])
        # the same bytes every time
        assert a.get(f"/v1/payments/quotes/{body['id']}").text == g.text


@pytest.mark.parametrize(
    ("buy", "amount", "sell", "sell_text", "rate_text"),
    [
        ("USD", "1000", "JPY", "148507", "148.507463"),  # JPY: no decimals
        ("USD", "1000.55", "JPY", "148589", "148.507463"),  # 148589.19... → 148589
        ("EUR", "100", "KWD", "33.218", "0.332177"),  # KWD: 3 decimals (33.2177 → 33.218)
        ("KWD", "10.005", "USD", "32.35", "3.23375"),  # 32.3536... → 32.35; KWD buys take 3 decimals
        ("JPY", "10000", "USD", "66.67", "0.006667"),
        ("USD", "1", "EUR", "0.92", "0.917051"),
        ("AUD", "1000000000", "USD", "651725000.00", "0.651725"),  # the upper limit
    ],
)
def test_quote_decimal_maths(fxpay_sandbox: Any, buy: str, amount: str, sell: str, sell_text: str, rate_text: str) -> None:
    exp = expected_price(buy, sell, Decimal(amount))
    with api(fxpay_sandbox) as a:
        r = a.c.post(
            "/v1/payments/quotes",
            content=f'{{"buyCurrency":"{buy}","buyAmount":{amount},"sellCurrency":"{sell}"}}',
            headers={**a.h, "Content-Type": "application/json"},
        )
        assert r.status_code == 201, r.text
        quote = a.read_quote(r.json()["id"])
    assert quote["customerRate"] == exp["customerRate"] == Decimal(rate_text)
    assert quote["inverseCustomerRate"] == exp["inverseCustomerRate"]
    assert quote["sellAmount"] == exp["sellAmount"]
    if MINOR[sell] == 0 or sell_text.endswith("00"):
        assert Decimal(str(quote["sellAmount"])) == Decimal(sell_text)
    else:
        assert str(quote["sellAmount"]) == sell_text
    # sellAmount has exactly the sell currency's minor units (no float noise, no extra digits)
    assert -Decimal(str(quote["sellAmount"])).as_tuple().exponent <= MINOR[sell]
    assert quote["buyAmount"] == Decimal(amount)
    assert quote["beneficiaries"] == 1  # the default


def test_fee_and_freebies(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        for claimed in range(3):
            quote_id = a.quote("GBP", 100, "AUD")
            q = a.read_quote(quote_id)
            assert q["freebies"] == {"total": 3, "claimed": claimed, "remaining": 3 - claimed}
            assert q["fee"] == 0
            assert q["feeCurrency"] == "GBP"
            r = a.deal(quote_id, [(a.beneficiary("AUD"), q["sellAmount"])])
            assert r.status_code == 201, r.text
        for buy in ["GBP", "JPY", "KWD", "EUR"]:
            q = a.read_quote(a.quote(buy, 100, "USD" if buy != "USD" else "EUR"))
            assert q["freebies"] == {"total": 3, "claimed": 3, "remaining": 0}
            assert str(q["fee"]) == FLAT_FEE[buy]
            assert q["feeCurrency"] == buy


def test_quote_made_before_a_claim_keeps_its_freebies(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        early = a.quote()
        a.booked()
        assert a.read_quote(early)["freebies"] == {"total": 3, "claimed": 0, "remaining": 3}
        assert a.read_quote(a.quote())["freebies"] == {"total": 3, "claimed": 1, "remaining": 2}
        # freebies are per client
        with http(fxpay_sandbox) as c:
            b = other_api(fxpay_sandbox, c)
            assert b.read_quote(b.quote())["freebies"] == {"total": 3, "claimed": 0, "remaining": 3}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, [("validation:quote:1001", "BuyCurrency"), ("validation:quote:1001", "SellCurrency"), ("validation:quote:1001", "BuyAmount")]),
        (
            {"buyCurrency": 840, "buyAmount": "1000", "sellCurrency": None},
            [("validation:quote:1002", "BuyCurrency"), ("validation:quote:1001", "SellCurrency"), ("validation:quote:1002", "BuyAmount")],
        ),
        (
            {"buyCurrency": "usd", "buyAmount": 10, "sellCurrency": "ABC"},
            [("validation:quote:1005", "BuyCurrency"), ("validation:quote:1005", "SellCurrency")],
        ),
        ({"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "BRL"}, [("validation:quote:1006", "SellCurrency")]),
        ({"buyCurrency": "USD", "buyAmount": 0.5, "sellCurrency": "EUR"}, [("validation:quote:1009", "BuyAmount")]),
        ({"buyCurrency": "USD", "buyAmount": -5, "sellCurrency": "EUR"}, [("validation:quote:1009", "BuyAmount")]),
        ({"buyCurrency": "USD", "buyAmount": 10.001, "sellCurrency": "EUR"}, [("validation:quote:1010", "BuyAmount")]),
        ({"buyCurrency": "JPY", "buyAmount": 1000.5, "sellCurrency": "EUR"}, [("validation:quote:1010", "BuyAmount")]),
        ({"buyCurrency": "KWD", "buyAmount": 10.0001, "sellCurrency": "EUR"}, [("validation:quote:1010", "BuyAmount")]),
        ({"buyCurrency": "USD", "buyAmount": 1000000000.01, "sellCurrency": "EUR"}, [("validation:quote:1011", "BuyAmount")]),
        ({"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR", "beneficiaries": 0}, [("validation:quote:1012", "Beneficiaries")]),
        (
            {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR", "beneficiaries": 101},
            [("validation:quote:1012", "Beneficiaries")],
        ),
        (
            {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR", "beneficiaries": 1.5},
            [("validation:quote:1002", "Beneficiaries")],
        ),
        (
            {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR", "beneficiaries": "2"},
            [("validation:quote:1002", "Beneficiaries")],
        ),
        (
            {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR", "beneficiaries": None},
            [("validation:quote:1001", "Beneficiaries")],
        ),
        ({"buyCurrency": "EUR", "buyAmount": 10, "sellCurrency": "EUR"}, [("validation:quote:1014", "SellCurrency")]),
        ({"buyCurrency": "USD", "buyAmount": True, "sellCurrency": "EUR"}, [("validation:quote:1002", "BuyAmount")]),
        ({"buyCurrency": "BRL", "buyAmount": 10, "sellCurrency": "USD"}, [("validation:quote:1006", "BuyCurrency")]),
        ({"buyCurrency": "INR", "buyAmount": Decimal("0.99"), "sellCurrency": "KWD"}, [("validation:quote:1009", "BuyAmount")]),
        (
            {"buyCurrency": "GBP", "buyAmount": Decimal("0.00000000000000000000000000001"), "sellCurrency": "USD"},
            [("validation:quote:1011", "BuyAmount")],
        ),
    ],
)
def test_quote_validation_codes(fxpay_sandbox: Any, body: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    with api(fxpay_sandbox) as a:
        r = a.post("/v1/payments/quotes", body)
        assert r.status_code == 400, r.text
        assert sorted(errors_of(r)) == sorted(expected)
        assert fxpay_sandbox.stats()["quotes"] == 0


def test_quote_errors_are_listed_in_field_order(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        r = a.post("/v1/payments/quotes", {})
        assert errors_of(r) == [
            ("validation:quote:1001", "BuyCurrency"),
            ("validation:quote:1001", "SellCurrency"),
            ("validation:quote:1001", "BuyAmount"),
        ]
        r = a.post("/v1/payments/quotes", {"buyCurrency": "usd", "buyAmount": "10", "sellCurrency": "XYZ", "beneficiaries": 0})
        assert [code for code, _ in errors_of(r)] == [
            "validation:quote:1005",
            "validation:quote:1005",
            "validation:quote:1002",
            "validation:quote:1012",
        ]


def test_trailing_zeros_are_not_decimal_places(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        r = a.post("/v1/payments/quotes", {"buyCurrency": "GBP", "buyAmount": Decimal("10.500"), "sellCurrency": "USD"})
        assert r.status_code == 201, r.text


def test_beneficiaries_two_point_zero_counts_as_integer(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        r = a.post("/v1/payments/quotes", {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR", "beneficiaries": 2.0})
        assert r.status_code == 201
        assert a.read_quote(r.json()["id"])["beneficiaries"] == 2


def test_unknown_and_foreign_quotes_are_404(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        mine = a.quote()
        b = other_api(sb, a.c)
        theirs = b.quote()
        for path in [
            f"/v1/payments/quotes/{theirs}",
            f"/v1/payments/quotes/{uuid.uuid4()}",
            "/v1/payments/quotes/not-a-uuid",
            f"/v1/payments/quotes/{mine}x",
        ]:
            r = a.get(path)
            assert r.status_code == 404, path
            assert errors_of(r) == [("resource:quote:3001", "")]
        assert b.get(f"/v1/payments/quotes/{mine}").status_code == 404
        assert a.get(f"/v1/payments/quotes/{mine}").status_code == 200
        assert a.get(f"/v1/payments/quotes/{mine.upper()}").json()["id"] == mine


# -- beneficiaries ----------------------------------------------------------------------------


def test_create_beneficiary(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        r = a.post("/v1/payments/beneficiaries", beneficiary_body("AUD", classification="Own Account"))
        assert r.status_code == 201
        assert r.headers["content-type"] == "application/json"
        body = r.json()
        assert list(body) == ["beneficiaryId"]
        assert UUID_RE.fullmatch(body["beneficiaryId"])
        # a currency the rate table lacks is still a valid beneficiary currency
        assert a.post("/v1/payments/beneficiaries", beneficiary_body("BRL", classification="Individual")).status_code == 201
        assert fxpay_sandbox.stats()["beneficiaries"] == 2


def test_empty_payment_reason(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        for empty in ["", "   ", "\t\n"]:
            r = a.post("/v1/payments/beneficiaries", beneficiary_body(paymentReason=empty))
            assert r.status_code == 400
            body = r.json()
            assert body == {
                "errors": [
                    {
                        "errorCode": "validation:beneficiary:1004",
                        "fieldName": "PaymentReason",
                        "message": "paymentReason must not be empty",
                    }
                ]
            }


REQUIRED = [
    (["currency"], "Currency"),
    (["name"], "Name"),
    (["classification"], "Classification"),
    (["paymentReason"], "PaymentReason"),
    (["beneficiaryBankDetails"], "BeneficiaryBankDetails"),
    (["beneficiaryAddress"], "BeneficiaryAddress"),
    (["beneficiaryBankDetails", "bankName"], "BeneficiaryBankDetails.BankName"),
    (["beneficiaryBankDetails", "bankBranchName"], "BeneficiaryBankDetails.BankBranchName"),
    (["beneficiaryBankDetails", "branchCode"], "BeneficiaryBankDetails.BranchCode"),
    (["beneficiaryBankDetails", "account"], "BeneficiaryBankDetails.Account"),
    (["beneficiaryBankDetails", "bankAddress"], "BeneficiaryBankDetails.BankAddress"),
    (["beneficiaryBankDetails", "bankAddress", "addressLine"], "BeneficiaryBankDetails.BankAddress.AddressLine"),
    (["beneficiaryBankDetails", "bankAddress", "citySuburb"], "BeneficiaryBankDetails.BankAddress.CitySuburb"),
    (["beneficiaryBankDetails", "bankAddress", "stateProvince"], "BeneficiaryBankDetails.BankAddress.StateProvince"),
    (["beneficiaryBankDetails", "bankAddress", "postCode"], "BeneficiaryBankDetails.BankAddress.PostCode"),
    (["beneficiaryBankDetails", "bankAddress", "country"], "BeneficiaryBankDetails.BankAddress.Country"),
    (["beneficiaryAddress", "addressLine"], "BeneficiaryAddress.AddressLine"),
    (["beneficiaryAddress", "citySuburb"], "BeneficiaryAddress.CitySuburb"),
    (["beneficiaryAddress", "stateProvince"], "BeneficiaryAddress.StateProvince"),
    (["beneficiaryAddress", "postCode"], "BeneficiaryAddress.PostCode"),
    (["beneficiaryAddress", "country"], "BeneficiaryAddress.Country"),
]
# Maximum lengths of the string fields (beneficiaries.rs).
MAX_LEN = {
    "Name": 140,
    "PaymentReason": 140,
    "BeneficiaryBankDetails.BankName": 140,
    "BeneficiaryBankDetails.BankBranchName": 140,
    "BeneficiaryBankDetails.BranchCode": 35,
    "BeneficiaryBankDetails.Account": 34,
    "BeneficiaryAddress.AddressLine": 140,
    "BeneficiaryAddress.CitySuburb": 100,
    "BeneficiaryAddress.StateProvince": 100,
    "BeneficiaryAddress.PostCode": 20,
    "BeneficiaryBankDetails.BankAddress.PostCode": 20,
}


def _set(body: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    node = body
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return body


@pytest.mark.parametrize(("path", "field"), REQUIRED, ids=[f for _, f in REQUIRED])
def test_every_beneficiary_field_is_required_and_typed(fxpay_sandbox: Any, path: list[str], field: str) -> None:
    with api(fxpay_sandbox) as a:
        for value, code in [(KeyError, "1001"), (None, "1001"), (12, "1002"), ([], "1002")]:
            r = a.post("/v1/payments/beneficiaries", _set(beneficiary_body(), path, value))
            assert r.status_code == 400, (field, value)
            assert errors_of(r) == [(f"validation:beneficiary:{code}", field)]
        assert fxpay_sandbox.stats()["beneficiaries"] == 0


@pytest.mark.parametrize(("field", "limit"), list(MAX_LEN.items()))
def test_beneficiary_lengths(fxpay_sandbox: Any, field: str, limit: int) -> None:
    path = next(p for p, f in REQUIRED if f == field)
    with api(fxpay_sandbox) as a:
        r = a.post("/v1/payments/beneficiaries", _set(beneficiary_body(), path, "é" * limit))
        assert r.status_code == 201, r.text  # characters, not bytes
        r = a.post("/v1/payments/beneficiaries", _set(beneficiary_body(), path, "x" * (limit + 1)))
        assert r.status_code == 400
        assert errors_of(r) == [("validation:beneficiary:1003", field)]
        r = a.post("/v1/payments/beneficiaries", _set(beneficiary_body(), path, ""))
        assert errors_of(r) == [("validation:beneficiary:1004", field)]


def test_beneficiary_value_rules_and_all_errors_listed(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        body = beneficiary_body(
            "usd",
            classification="own account",
            paymentReason="",
            beneficiaryAddress=address("gb"),
        )
        body["beneficiaryBankDetails"]["bankAddress"]["country"] = "ZZ"
        r = a.post("/v1/payments/beneficiaries", body)
        assert r.status_code == 400
        assert errors_of(r) == [
            ("validation:beneficiary:1005", "Currency"),
            ("validation:beneficiary:1008", "Classification"),
            ("validation:beneficiary:1004", "PaymentReason"),
            ("validation:beneficiary:1007", "BeneficiaryBankDetails.BankAddress.Country"),
            ("validation:beneficiary:1007", "BeneficiaryAddress.Country"),
        ]
        for country in ["GBR", "XX", "", "uk"]:
            r = a.post("/v1/payments/beneficiaries", beneficiary_body(beneficiaryAddress=address(country)))
            assert errors_of(r) == [("validation:beneficiary:1007", "BeneficiaryAddress.Country")]
        for ok in ["Own Account", "Individual", "Business"]:
            assert a.post("/v1/payments/beneficiaries", beneficiary_body(classification=ok)).status_code == 201


def test_blank_means_ascii_whitespace_only(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        r = a.post("/v1/payments/beneficiaries", beneficiary_body(name=" \t\r\n"))
        assert errors_of(r) == [("validation:beneficiary:1004", "Name")]
        assert a.post("/v1/payments/beneficiaries", beneficiary_body(name="\u00a0")).status_code == 201


def test_beneficiary_malformed_json_and_non_objects(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        for raw, code in [
            ('{"currency": "AUD",', "validation:request:1001"),
            ("", "validation:request:1001"),
            ("{'single': 'quotes'}", "validation:request:1001"),
            ("[1, 2]", "validation:request:1002"),
            ('"just a string"', "validation:request:1002"),
            ("null", "validation:request:1002"),
        ]:
            r = a.c.post("/v1/payments/beneficiaries", content=raw, headers={**a.h, "Content-Type": "application/json"})
            assert r.status_code == 400, raw
            assert errors_of(r) == [(code, "")]
        r = a.post("/v1/payments/beneficiaries", {**beneficiary_body(), "beneficiaryBankDetails": "Bank of Sydney"})
        assert errors_of(r) == [("validation:beneficiary:1002", "BeneficiaryBankDetails")]
        assert fxpay_sandbox.stats()["beneficiaries"] == 0


# -- deals ------------------------------------------------------------------------------------


def test_deal_books_at_once_then_paid_after_a_day(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        quote_id = a.quote("USD", 1000, "AUD", beneficiaries=2)
        sell = a.read_quote(quote_id)["sellAmount"]
        assert sell == Decimal("1519.08")  # 1/0.655 * 0.995 = 1.519084 → 1519.084 → 1519.08
        b1, b2 = a.beneficiary(), a.beneficiary()
        r = a.deal(quote_id, [(b1, Decimal("1000.00")), (b2, Decimal("519.08"))])
        assert r.status_code == 201, r.text
        body = r.json()
        assert UUID_RE.fullmatch(body["dealId"])
        assert body == {"dealId": body["dealId"], "status": "Booked"}
        deal_id = body["dealId"]
        assert sb.deal_status(deal_id) == "Booked"
        with pytest.raises(fxpay.InvalidRequestError, match="no deal"):
            sb.deal_status(str(uuid.uuid4()))
        (deal,) = sb.deals()
        assert deal["dealId"] == deal_id
        assert deal["quoteId"] == quote_id
        assert deal["kind"] == "deal"
        assert deal["processId"] is None
        assert deal["fundingSource"] == "Own account"
        assert deal["channel"] == "FxpaySecure"
        assert deal["clientId"] == sb.client_id
        assert [(x["beneficiaryId"], str(x["amount"])) for x in deal["beneficiaries"]] == [(b1, "1000.00"), (b2, "519.08")]
        sb.advance(86399)
        assert sb.deal_status(deal_id) == "Booked"
        sb.advance(1.5)
        assert sb.deal_status(deal_id) == "Paid"
        assert sb.deals()[0]["status"] == "Paid"


def test_direct_debit_and_no_channel(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        quote_id = a.quote()
        body = a.deal_body(quote_id, [(a.beneficiary(), a.read_quote(quote_id)["sellAmount"])], funding="Direct Debit")
        del body["channel"]
        r = a.post("/v1/payments/deals", body)
        assert r.status_code == 201, r.text
        assert fxpay_sandbox.deals()[0]["channel"] is None
        assert fxpay_sandbox.deals()[0]["fundingSource"] == "Direct Debit"


def test_quote_reuse_is_409(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        quote_id = a.quote()
        sell = a.read_quote(quote_id)["sellAmount"]
        ben = a.beneficiary()
        first = a.deal(quote_id, [(ben, sell)])
        assert first.status_code == 201
        r = a.deal(quote_id, [(ben, sell)])
        assert r.status_code == 409
        assert errors_of(r) == [("business:deal:2002", "QuoteId")]
        assert first.json()["dealId"] in r.json()["errors"][0]["message"]
        assert len(fxpay_sandbox.deals()) == 1


def test_deal_quote_must_exist_and_belong_to_the_client(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        ben = a.beneficiary()
        r = a.deal(str(uuid.uuid4()), [(ben, Decimal("10.00"))])
        assert r.status_code == 404
        assert errors_of(r) == [("business:deal:2001", "QuoteId")]
        b = other_api(sb, a.c)
        theirs = b.quote()
        r = a.deal(theirs, [(ben, b.read_quote(theirs)["sellAmount"])])
        assert r.status_code == 404
        assert errors_of(r) == [("business:deal:2001", "QuoteId")]
        assert sb.deals() == []


def test_deal_beneficiaries_must_exist_and_belong_to_the_client(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        quote_id = a.quote(beneficiaries=2)
        sell = a.read_quote(quote_id)["sellAmount"]
        b = other_api(sb, a.c)
        theirs = b.beneficiary()
        mine = a.beneficiary()
        r = a.deal(quote_id, [(mine, sell - 1), (theirs, Decimal(1))])
        assert r.status_code == 404
        assert errors_of(r) == [("business:deal:2003", "Beneficiaries[1].BeneficiaryId")]
        r = a.deal(quote_id, [(str(uuid.uuid4()), sell - 1), (mine, Decimal(1))])
        assert r.status_code == 404
        assert errors_of(r) == [("business:deal:2003", "Beneficiaries[0].BeneficiaryId")]
        # the quote is still free
        assert a.deal(quote_id, [(mine, sell - 1), (a.beneficiary(), Decimal(1))]).status_code == 201


def test_deal_count_must_match_the_quote(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        quote_id = a.quote(beneficiaries=2)
        sell = a.read_quote(quote_id)["sellAmount"]
        r = a.deal(quote_id, [(a.beneficiary(), sell)])
        assert r.status_code == 422
        assert errors_of(r) == [("business:deal:2004", "Beneficiaries")]
        assert "2 beneficiaries" in r.json()["errors"][0]["message"]


def test_deal_currencies_must_match(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        quote_id = a.quote("USD", 1000, "AUD")
        sell = a.read_quote(quote_id)["sellAmount"]
        r = a.deal(quote_id, [(a.beneficiary("NZD"), sell)])
        assert r.status_code == 422
        assert errors_of(r) == [("business:deal:2005", "Beneficiaries[0].BeneficiaryId")]
        assert r.json()["errors"][0]["message"] == "the beneficiary receives NZD, the quote sells AUD"


def test_deal_amounts_must_add_up(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        quote_id = a.quote("USD", 1000, "AUD", beneficiaries=2)
        sell = a.read_quote(quote_id)["sellAmount"]
        b1, b2 = a.beneficiary(), a.beneficiary()
        for amounts in [(sell, Decimal("0.01")), (sell / 2, sell / 2 - Decimal("0.01"))]:
            r = a.deal(quote_id, [(b1, amounts[0]), (b2, amounts[1])])
            assert r.status_code == 422, r.text
            assert errors_of(r) == [("business:deal:2006", "Beneficiaries")]
        # 1519.07 + 0.001 = 1519.071 ≠ 1519.08, and AUD takes 2 decimals: both rules are listed
        r = a.deal(quote_id, [(b1, Decimal("1519.07")), (b2, Decimal("0.001"))])
        assert r.status_code == 422
        assert errors_of(r) == [("business:deal:2008", "Beneficiaries[1].Amount"), ("business:deal:2006", "Beneficiaries")]
        # exact decimal sum: 0.1 + 0.2 style amounts add up exactly
        assert a.deal(quote_id, [(b1, Decimal("1518.98")), (b2, Decimal("0.10"))]).status_code == 201


def test_deal_duplicate_beneficiary_and_decimals(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        quote_id = a.quote("USD", 1000, "JPY", beneficiaries=2)
        sell = a.read_quote(quote_id)["sellAmount"]
        assert sell == 148507
        ben = a.beneficiary("JPY")
        r = a.deal(quote_id, [(ben, Decimal(148000)), (ben, Decimal(507))])
        assert r.status_code == 422
        assert errors_of(r) == [("business:deal:2007", "Beneficiaries[1].BeneficiaryId")]
        other = a.beneficiary("JPY")
        r = a.deal(quote_id, [(ben, Decimal("148000.5")), (other, Decimal("506.5"))])
        assert r.status_code == 422
        assert errors_of(r) == [
            ("business:deal:2008", "Beneficiaries[0].Amount"),
            ("business:deal:2008", "Beneficiaries[1].Amount"),
        ]
        assert a.deal(quote_id, [(ben, Decimal(148000)), (other, Decimal(507))]).status_code == 201


def test_deal_lists_every_broken_rule(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        quote_id = a.quote("USD", 1000, "AUD", beneficiaries=3)
        r = a.deal(quote_id, [(a.beneficiary("EUR"), Decimal(1)), (a.beneficiary("AUD"), Decimal(2))])
        assert r.status_code == 422
        assert errors_of(r) == [
            ("business:deal:2004", "Beneficiaries"),
            ("business:deal:2005", "Beneficiaries[0].BeneficiaryId"),
            ("business:deal:2006", "Beneficiaries"),
        ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"quoteId": "not-a-uuid"}, [("validation:deal:1013", "QuoteId")]),
        (
            {"quoteId": "nope", "fundingSource": "Cash", "channel": "", "beneficiaries": []},
            [
                ("validation:deal:1013", "QuoteId"),
                ("validation:deal:1008", "FundingSource"),
                ("validation:deal:1004", "Channel"),
                ("validation:deal:1004", "Beneficiaries"),
            ],
        ),
        ({"quoteId": None}, [("validation:deal:1001", "QuoteId")]),
        ({"fundingSource": "own account"}, [("validation:deal:1008", "FundingSource")]),
        ({"fundingSource": "Credit Card"}, [("validation:deal:1008", "FundingSource")]),
        ({"channel": ""}, [("validation:deal:1004", "Channel")]),
        ({"channel": "x" * 65}, [("validation:deal:1003", "Channel")]),
        ({"beneficiaries": []}, [("validation:deal:1004", "Beneficiaries")]),
        ({"beneficiaries": {}}, [("validation:deal:1002", "Beneficiaries")]),
        ({"beneficiaries": ["x"]}, [("validation:deal:1002", "Beneficiaries[0]")]),
        (
            {"beneficiaries": [{}]},
            [
                ("validation:deal:1001", "Beneficiaries[0].BeneficiaryId"),
                ("validation:deal:1001", "Beneficiaries[0].Amount"),
                ("validation:deal:1001", "Beneficiaries[0].PayReason"),
                ("validation:deal:1001", "Beneficiaries[0].PayReference"),
            ],
        ),
        (
            {"beneficiaries": [{"beneficiaryId": str(uuid.uuid4()), "amount": 0, "payReason": "r", "payReference": "f"}]},
            [("validation:deal:1009", "Beneficiaries[0].Amount")],
        ),
        (
            {"beneficiaries": [{"beneficiaryId": str(uuid.uuid4()), "amount": 1.0001, "payReason": "r", "payReference": "f"}]},
            [("validation:deal:1010", "Beneficiaries[0].Amount")],
        ),
        (
            {"beneficiaries": [{"beneficiaryId": str(uuid.uuid4()), "amount": "10", "payReason": "", "payReference": "f"}]},
            [("validation:deal:1002", "Beneficiaries[0].Amount"), ("validation:deal:1004", "Beneficiaries[0].PayReason")],
        ),
    ],
)
def test_deal_field_errors_are_400(fxpay_sandbox: Any, change: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    with api(fxpay_sandbox) as a:
        quote_id = a.quote()
        body = a.deal_body(quote_id, [(a.beneficiary(), a.read_quote(quote_id)["sellAmount"])])
        body.update(change)
        r = a.post("/v1/payments/deals", body)
        assert r.status_code == 400, r.text
        assert errors_of(r) == expected
        assert fxpay_sandbox.deals() == []


def test_deal_with_101_beneficiaries_is_400(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        ben = str(uuid.uuid4())
        lines = [(ben, Decimal(1))] * 101
        r = a.post("/v1/payments/deals", a.deal_body(str(uuid.uuid4()), lines))
        assert r.status_code == 400
        assert errors_of(r) == [("validation:deal:1012", "Beneficiaries")]
