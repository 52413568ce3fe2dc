//! Payments in the sandbox over real HTTP: quote maths, freebies, beneficiary validation,
//! deal checks (each rule), the Booked → Paid clock, and virtual accounts.
mod sandbox_support;

use std::str::FromStr;

use rust_decimal::Decimal;
use sandbox_support::*;
use serde_json::{json, Value};

fn dec(v: &Value) -> Decimal {
    Decimal::from_str(&v.to_string()).unwrap_or_else(|_| panic!("not a decimal: {v}"))
}

fn d(s: &str) -> Decimal {
    Decimal::from_str(s).expect("decimal literal")
}

#[tokio::test]
async fn quote_maths_is_exact() {
    let t = start().await;
    let tok = t.cc_token().await;
    let cases = [
        ("EUR", "1523.45", "GBP", "0.850059", "1295.02", "1.176389"),
        ("GBP", "1000.00", "USD", "1.26365", "1263.65", "0.791358"),
        ("USD", "1000", "JPY", "148.507463", "148507", "0.006734"),
        ("EUR", "100", "KWD", "0.332177", "33.218", "3.010443"),
    ];
    for (buy, amount, sell, rate, sell_amount, inverse) in cases {
        let id = t.quote(&tok, buy, amount, sell, 1).await;
        let r = t.get(&format!("/v1/payments/quotes/{id}"), &tok).await;
        assert_eq!(r.status, 200);
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("application/json")
        );
        let q = r.json();
        assert_eq!(q["id"], id.as_str());
        assert_eq!(q["buyCurrency"], buy);
        assert_eq!(q["sellCurrency"], sell);
        assert_eq!(q["feeCurrency"], buy);
        assert_eq!(dec(&q["buyAmount"]), d(amount));
        assert_eq!(dec(&q["customerRate"]), d(rate), "{buy}->{sell}");
        assert_eq!(dec(&q["sellAmount"]), d(sell_amount), "{buy}->{sell}");
        assert_eq!(dec(&q["inverseCustomerRate"]), d(inverse), "{buy}->{sell}");
        // Written as exact JSON numbers, never float noise.
        assert!(
            r.text.contains(&format!("\"sellAmount\":{sell_amount}")),
            "{}",
            r.text
        );
        assert!(
            r.text.contains(&format!("\"buyAmount\":{amount}")),
            "{}",
            r.text
        );
        assert_eq!(
            dec(&q["fee"]),
            Decimal::ZERO,
            "a freebie remains: the fee is waived"
        );
        assert_eq!(
            q["freebies"],
            json!({"total": 3, "claimed": 0, "remaining": 3})
        );
        assert_eq!(q["beneficiaries"], 1);
        assert!(q["createdAt"].as_str().is_some_and(|s| s.ends_with('Z')));
    }
    // A JPY sell amount has no decimals.
    let id = t.quote(&tok, "USD", "1000", "JPY", 1).await;
    assert_eq!(
        t.get_quote(&tok, &id).await["sellAmount"].to_string(),
        "148507"
    );
}

#[tokio::test]
async fn quote_validation_collects_every_error() {
    let t = start().await;
    let tok = t.cc_token().await;
    let post = |body: Value| {
        let (t, tok) = (&t, tok.clone());
        async move { t.post_json("/v1/payments/quotes", &tok, &body).await }
    };
    let r = post(json!({})).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.fields(),
        [
            ("validation:quote:1001".to_owned(), "BuyCurrency".to_owned()),
            (
                "validation:quote:1001".to_owned(),
                "SellCurrency".to_owned()
            ),
            ("validation:quote:1001".to_owned(), "BuyAmount".to_owned()),
        ]
    );
    let r = post(
        json!({"buyCurrency": "usd", "buyAmount": "10", "sellCurrency": "XYZ", "beneficiaries": 0}),
    )
    .await;
    assert_eq!(
        r.codes(),
        [
            "validation:quote:1005",
            "validation:quote:1005",
            "validation:quote:1002",
            "validation:quote:1012"
        ]
    );
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"buyCurrency": "BRL", "buyAmount": 10, "sellCurrency": "USD"}),
            "validation:quote:1006",
            "BuyCurrency",
        ),
        (
            json!({"buyCurrency": "GBP", "buyAmount": 0, "sellCurrency": "USD"}),
            "validation:quote:1009",
            "BuyAmount",
        ),
        (
            json!({"buyCurrency": "GBP", "buyAmount": num("-5"), "sellCurrency": "USD"}),
            "validation:quote:1009",
            "BuyAmount",
        ),
        (
            json!({"buyCurrency": "GBP", "buyAmount": num("2e9"), "sellCurrency": "USD"}),
            "validation:quote:1011",
            "BuyAmount",
        ),
        (
            json!({"buyCurrency": "GBP", "buyAmount": 10, "sellCurrency": "GBP"}),
            "validation:quote:1014",
            "SellCurrency",
        ),
        (
            json!({"buyCurrency": "JPY", "buyAmount": num("10.5"), "sellCurrency": "USD"}),
            "validation:quote:1010",
            "BuyAmount",
        ),
        (
            json!({"buyCurrency": "GBP", "buyAmount": 10, "sellCurrency": "USD", "beneficiaries": num("1.5")}),
            "validation:quote:1002",
            "Beneficiaries",
        ),
        (
            json!({"buyCurrency": "GBP", "buyAmount": 10, "sellCurrency": "USD", "beneficiaries": 101}),
            "validation:quote:1012",
            "Beneficiaries",
        ),
        (
            json!({"buyCurrency": "INR", "buyAmount": num("0.99"), "sellCurrency": "KWD"}),
            "validation:quote:1009",
            "BuyAmount",
        ),
        (
            json!({"buyCurrency": "GBP", "buyAmount": num("0.00000000000000000000000000001"), "sellCurrency": "USD"}),
            "validation:quote:1011",
            "BuyAmount",
        ),
    ];
    for (body, code, field) in cases {
        let r = post(body.clone()).await;
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(r.fields(), [(code.to_owned(), field.to_owned())], "{body}");
    }
    // Trailing zeros are fine: 10.50 GBP has two decimals.
    assert_eq!(
        post(json!({"buyCurrency": "GBP", "buyAmount": num("10.500"), "sellCurrency": "USD"}))
            .await
            .status,
        201
    );
    assert_eq!(t.sb.stats()["quotes"], 1);
}

#[tokio::test]
async fn quotes_belong_to_their_client() {
    let t = start().await;
    let tok = t.cc_token().await;
    t.sb.register_client("second", "second-secret", &[]);
    let other = t.cc_token_of("second", "second-secret").await;
    let id = t.quote(&tok, "GBP", "100", "USD", 1).await;
    assert_eq!(
        t.get(&format!("/v1/payments/quotes/{id}"), &tok)
            .await
            .status,
        200
    );
    let upper = id.to_uppercase();
    assert_eq!(
        t.get(&format!("/v1/payments/quotes/{upper}"), &tok)
            .await
            .status,
        200
    );
    for path in [
        format!("/v1/payments/quotes/{id}"),
        "/v1/payments/quotes/00000000-0000-4000-8000-000000000000".to_owned(),
        "/v1/payments/quotes/not-a-uuid".to_owned(),
    ] {
        let who = if path.contains(&id) { &other } else { &tok };
        let r = t.get(&path, who).await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.codes(), ["resource:quote:3001"]);
    }
    // A deal on another client's quote fails as "quote not found".
    let ben = t.beneficiary(&other, "USD").await;
    let r = t
        .post_json(
            "/v1/payments/deals",
            &other,
            &Ctx::deal_body(&id, &ben, "126.37"),
        )
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.fields(),
        [("business:deal:2001".to_owned(), "QuoteId".to_owned())]
    );
}

#[tokio::test]
async fn freebies_waive_the_fee_three_times() {
    let t = start().await;
    let tok = t.cc_token().await;
    let ben = t.beneficiary(&tok, "USD").await;
    for n in 0..4u32 {
        let id = t.quote(&tok, "GBP", "1000.00", "USD", 1).await;
        let q = t.get_quote(&tok, &id).await;
        let claimed = n.min(3);
        assert_eq!(
            q["freebies"],
            json!({"total": 3, "claimed": claimed, "remaining": 3 - claimed})
        );
        let fee = if n < 3 { "0.00" } else { "4.00" };
        assert_eq!(q["fee"].to_string(), fee, "quote {n}");
        let r = t
            .post_json(
                "/v1/payments/deals",
                &tok,
                &Ctx::deal_body(&id, &ben, "1263.65"),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let id = t.quote(&tok, "USD", "10", "GBP", 1).await;
    let q = t.get_quote(&tok, &id).await;
    assert_eq!(
        q["freebies"],
        json!({"total": 3, "claimed": 3, "remaining": 0})
    );
    assert_eq!(q["fee"].to_string(), "5.00");
    assert_eq!(q["feeCurrency"], "USD");
}

#[tokio::test]
async fn beneficiary_validation() {
    let t = start().await;
    let tok = t.cc_token().await;
    let post = |body: Value| {
        let (t, tok) = (&t, tok.clone());
        async move { t.post_json("/v1/payments/beneficiaries", &tok, &body).await }
    };
    let r = post(beneficiary_body("GBP")).await;
    assert_eq!(r.status, 201);
    assert!(r.json()["beneficiaryId"]
        .as_str()
        .is_some_and(|s| uuid::Uuid::parse_str(s).is_ok()));

    let mut b = beneficiary_body("GBP");
    b["paymentReason"] = json!("");
    let r = post(b).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.fields(),
        [(
            "validation:beneficiary:1004".to_owned(),
            "PaymentReason".to_owned()
        )]
    );

    let mut b = beneficiary_body("GBP");
    b["currency"] = json!("GBX");
    b.as_object_mut().map(|o| o.remove("name"));
    b["classification"] = json!("Alien");
    b["beneficiaryBankDetails"]["bankName"] = json!(42);
    b["beneficiaryBankDetails"]["account"] = json!("1".repeat(35));
    b["beneficiaryBankDetails"]["bankAddress"]["country"] = json!("UK");
    b["beneficiaryAddress"] = json!("nowhere");
    let r = post(b).await;
    assert_eq!(r.status, 400);
    let want = [
        ("validation:beneficiary:1005", "Currency"),
        ("validation:beneficiary:1001", "Name"),
        ("validation:beneficiary:1008", "Classification"),
        (
            "validation:beneficiary:1002",
            "BeneficiaryBankDetails.BankName",
        ),
        (
            "validation:beneficiary:1003",
            "BeneficiaryBankDetails.Account",
        ),
        (
            "validation:beneficiary:1007",
            "BeneficiaryBankDetails.BankAddress.Country",
        ),
        ("validation:beneficiary:1002", "BeneficiaryAddress"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    assert_eq!(r.fields(), want);
    for e in r.json()["errors"].as_array().expect("errors") {
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // Any ISO currency is a valid beneficiary currency; classification is exact.
    let mut b = beneficiary_body("BRL");
    b["classification"] = json!("business");
    let r = post(b.clone()).await;
    assert_eq!(
        r.fields(),
        [(
            "validation:beneficiary:1008".to_owned(),
            "Classification".to_owned()
        )]
    );
    b["classification"] = json!("Business");
    assert_eq!(post(b).await.status, 201);
    // Blank means spaces, tabs and line breaks only.
    let mut b = beneficiary_body("GBP");
    b["name"] = json!(" \t\r\n");
    assert_eq!(
        post(b.clone()).await.codes(),
        ["validation:beneficiary:1004"]
    );
    b["name"] = json!("\u{a0}");
    assert_eq!(post(b).await.status, 201);
}

#[tokio::test]
async fn deal_rules_each_fail_alone() {
    let t = start().await;
    let tok = t.cc_token().await;
    t.sb.register_client("second", "second-secret", &[]);
    let other = t.cc_token_of("second", "second-secret").await;
    let usd = t.beneficiary(&tok, "USD").await;
    let usd2 = t.beneficiary(&tok, "USD").await;
    let eur = t.beneficiary(&tok, "EUR").await;
    let foreign = t.beneficiary(&other, "USD").await;
    let q1 = t.quote(&tok, "GBP", "1000.00", "USD", 1).await; // sells 1263.65 USD
    let q2 = t.quote(&tok, "GBP", "1000.00", "USD", 2).await;
    let deal = |body: Value| {
        let (t, tok) = (&t, tok.clone());
        async move { t.post_json("/v1/payments/deals", &tok, &body).await }
    };
    let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    let two = |q: &str, a: (&str, &str), b: (&str, &str)| {
        json!({"quoteId": q, "fundingSource": "Direct Debit", "beneficiaries": [
            {"beneficiaryId": a.0, "amount": num(a.1), "payReason": "r", "payReference": "x"},
            {"beneficiaryId": b.0, "amount": num(b.1), "payReason": "r", "payReference": "y"}]})
    };

    let r = deal(Ctx::deal_body(
        "00000000-0000-4000-8000-000000000001",
        &usd,
        "1263.65",
    ))
    .await;
    assert_eq!(
        (r.status, r.fields()),
        (404, vec![pair("business:deal:2001", "QuoteId")])
    );
    let r = deal(Ctx::deal_body(
        &q1,
        "00000000-0000-4000-8000-000000000002",
        "1263.65",
    ))
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.fields(),
        [pair("business:deal:2003", "Beneficiaries[0].BeneficiaryId")]
    );
    let r = deal(Ctx::deal_body(&q1, &foreign, "1263.65")).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.fields(),
        [pair("business:deal:2003", "Beneficiaries[0].BeneficiaryId")]
    );
    let r = deal(Ctx::deal_body(&q2, &usd, "1263.65")).await;
    assert_eq!(
        r.status, 422,
        "business rules other than unknown ids and reuse answer 422"
    );
    assert_eq!(r.fields(), [pair("business:deal:2004", "Beneficiaries")]);
    let r = deal(Ctx::deal_body(&q1, &eur, "1263.65")).await;
    assert_eq!(
        r.fields(),
        [pair("business:deal:2005", "Beneficiaries[0].BeneficiaryId")]
    );
    let r = deal(Ctx::deal_body(&q1, &usd, "1263.64")).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.fields(), [pair("business:deal:2006", "Beneficiaries")]);
    assert!(r.json()["errors"][0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("1263.65")));
    let r = deal(two(&q2, (&usd, "1000"), (&usd, "263.65"))).await;
    assert_eq!(
        r.fields(),
        [pair("business:deal:2007", "Beneficiaries[1].BeneficiaryId")]
    );
    let r = deal(two(&q2, (&usd, "1000.005"), (&usd2, "263.645"))).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.fields(),
        [
            pair("business:deal:2008", "Beneficiaries[0].Amount"),
            pair("business:deal:2008", "Beneficiaries[1].Amount")
        ]
    );
    assert!(t.sb.deals().is_empty(), "no failed deal was booked");

    // Field errors.
    let r = deal(
        json!({"quoteId": "nope", "fundingSource": "Cash", "channel": "", "beneficiaries": []}),
    )
    .await;
    assert_eq!(
        r.fields(),
        [
            pair("validation:deal:1013", "QuoteId"),
            pair("validation:deal:1008", "FundingSource"),
            pair("validation:deal:1004", "Channel"),
            pair("validation:deal:1004", "Beneficiaries"),
        ]
    );
    let r = deal(json!({"quoteId": q1, "fundingSource": "Own account", "beneficiaries": [7, {"beneficiaryId": usd, "amount": 0, "payReason": "", "payReference": "x"}]})).await;
    assert_eq!(
        r.fields(),
        [
            pair("validation:deal:1002", "Beneficiaries[0]"),
            pair("validation:deal:1009", "Beneficiaries[1].Amount"),
            pair("validation:deal:1004", "Beneficiaries[1].PayReason"),
        ]
    );

    // Success, then the quote cannot be used again.
    let r = deal(two(&q2, (&usd, "1000.00"), (&usd2, "263.65"))).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let deal_id = r.json()["dealId"].as_str().expect("dealId").to_owned();
    let r = deal(two(&q2, (&usd, "1000.00"), (&usd2, "263.65"))).await;
    assert_eq!(
        (r.status, r.fields()),
        (409, vec![pair("business:deal:2002", "QuoteId")])
    );
    let deals = t.sb.deals();
    assert_eq!(deals.len(), 1);
    let dj = &deals[0];
    assert_eq!(dj["dealId"], deal_id.as_str());
    assert_eq!(dj["quoteId"], q2.as_str());
    assert_eq!(dj["kind"], "deal");
    assert_eq!(dj["processId"], Value::Null);
    assert_eq!(dj["clientId"], t.sb.client_id());
    assert_eq!(dj["fundingSource"], "Direct Debit");
    assert_eq!(dj["status"], "Booked");
    assert_eq!(dj["beneficiaries"][1]["amount"].to_string(), "263.65");
}

#[tokio::test]
async fn deals_become_paid_after_a_day() {
    let t = start().await;
    let tok = t.cc_token().await;
    let ben = t.beneficiary(&tok, "USD").await;
    let q = t.quote(&tok, "GBP", "1000.00", "USD", 1).await;
    let r = t
        .post_json(
            "/v1/payments/deals",
            &tok,
            &Ctx::deal_body(&q, &ben, "1263.65"),
        )
        .await;
    assert_eq!(r.status, 201);
    let id = r.json()["dealId"].as_str().expect("id").to_owned();
    assert_eq!(t.sb.deal_status(&id).as_deref(), Some("Booked"));
    assert_eq!(t.sb.deal_status("no-such-deal"), None);
    let before = t.sb.now();
    t.sb.advance(86_000.0);
    assert!(t.sb.now() - before >= 86_000.0);
    assert_eq!(t.sb.deal_status(&id).as_deref(), Some("Booked"));
    t.sb.advance(400.0);
    assert_eq!(t.sb.deal_status(&id).as_deref(), Some("Paid"));
    assert_eq!(t.sb.deals()[0]["status"], "Paid");
}

#[tokio::test]
async fn virtual_accounts_list() {
    let t = start().await;
    let tok = t.user_tokens().await["access_token"]
        .as_str()
        .expect("a")
        .to_owned();
    let r = t.get("/v1/gca/virtual-accounts", &tok).await;
    assert_eq!(r.status, 200);
    let list = r.json()["virtualAccounts"]
        .as_array()
        .cloned()
        .expect("list");
    assert_eq!(list.len(), 3);
    let currencies: Vec<&str> = list.iter().filter_map(|a| a["currency"].as_str()).collect();
    assert_eq!(currencies, ["EUR", "GBP", "USD"]);
    for a in &list {
        for key in [
            "id",
            "accountName",
            "accountNumber",
            "bankName",
            "bic",
            "country",
            "status",
            "createdAt",
        ] {
            assert!(a[key].as_str().is_some_and(|s| !s.is_empty()), "{key}");
        }
        assert!(a["balance"].is_number());
    }
    assert_eq!(list[0]["iban"], "DE89370400440532013000");
    assert!(r.text.contains("\"balance\":8420.55"));
    assert_eq!(dec(&list[2]["balance"]), d("25000.00"));
    assert!(list[2].get("iban").is_none());
    // The same list again (fixed per user).
    let again = t.get("/v1/gca/virtual-accounts", &tok).await;
    assert_eq!(again.text, r.text);
}
