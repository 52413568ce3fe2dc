//! OAuth in the sandbox over real HTTP: the token endpoint's grants and errors, rotation,
//! code rules, the authorize/login/consent pages, scopes on protected endpoints, expiry.
mod sandbox_support;

use base64::Engine;
use sandbox_support::*;

#[tokio::test]
async fn client_credentials_by_form_and_basic() {
    let t = start().await;
    let r = t
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", t.sb.client_id()),
            ("client_secret", t.sb.client_secret()),
            ("scope", "payments"),
        ])
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    let j = r.json();
    assert_eq!(j["expires_in"], 3599);
    assert_eq!(j["token_type"], "Bearer");
    assert_eq!(j["scope"], "payments");
    assert!(j["access_token"].as_str().is_some_and(|s| s.len() >= 32));
    assert!(
        j.get("refresh_token").is_none(),
        "client credentials give no refresh token"
    );

    let basic = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        t.sb.client_id(),
        t.sb.client_secret()
    ));
    let r = t
        .http
        .post(t.url("/v1/oauth/token"))
        .header("authorization", format!("Basic {basic}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials")
        .send()
        .await
        .expect("send");
    let r = finish(r).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["scope"], "payments");
    let stats = t.sb.stats();
    assert_eq!(stats["token_requests"], 2);
    assert_eq!(stats["tokens_issued"]["client_credentials"], 2);
}

/// Form fields of one token request.
type Form<'a> = Vec<(&'a str, &'a str)>;

#[tokio::test]
async fn token_endpoint_errors() {
    let t = start().await;
    let (id, secret) = (t.sb.client_id().to_owned(), t.sb.client_secret().to_owned());

    // JSON body → invalid_request.
    let r = t
        .http
        .post(t.url("/v1/oauth/token"))
        .header("content-type", "application/json")
        .body(r#"{"grant_type":"client_credentials"}"#)
        .send()
        .await
        .expect("send");
    let r = finish(r).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("invalid_request"))
    );
    assert!(r.json()["error_description"].as_str().is_some());

    let cases: Vec<(Form, u16, &str)> = vec![
        (
            vec![("client_id", &id), ("client_secret", &secret)],
            400,
            "invalid_request",
        ),
        (
            vec![
                ("grant_type", "password"),
                ("client_id", &id),
                ("client_secret", &secret),
            ],
            400,
            "unsupported_grant_type",
        ),
        (
            vec![
                ("grant_type", "client_credentials"),
                ("client_id", &id),
                ("client_secret", "wrong"),
            ],
            401,
            "invalid_client",
        ),
        (
            vec![
                ("grant_type", "client_credentials"),
                ("client_id", "nobody"),
                ("client_secret", &secret),
            ],
            401,
            "invalid_client",
        ),
        (
            vec![("grant_type", "client_credentials")],
            401,
            "invalid_client",
        ),
        (
            vec![
                ("grant_type", "client_credentials"),
                ("client_id", &id),
                ("client_secret", &secret),
                ("scope", "gca-aisp"),
            ],
            400,
            "invalid_scope",
        ),
        (
            vec![
                ("grant_type", "client_credentials"),
                ("grant_type", "client_credentials"),
                ("client_id", &id),
                ("client_secret", &secret),
            ],
            400,
            "invalid_request",
        ),
        (
            vec![
                ("grant_type", "authorization_code"),
                ("client_id", &id),
                ("client_secret", &secret),
            ],
            400,
            "invalid_request",
        ),
        (
            vec![
                ("grant_type", "authorization_code"),
                ("client_id", &id),
                ("client_secret", &secret),
                ("code", "made-up"),
                ("redirect_uri", "https://app.example.test/callback"),
            ],
            400,
            "invalid_grant",
        ),
        (
            vec![
                ("grant_type", "refresh_token"),
                ("client_id", &id),
                ("client_secret", &secret),
                ("refresh_token", "made-up"),
            ],
            400,
            "invalid_grant",
        ),
    ];
    for (pairs, status, error) in cases {
        let r = t.form(&pairs).await;
        assert_eq!(r.status, status, "{pairs:?}: {}", r.text);
        assert_eq!(r.json()["error"], error, "{pairs:?}");
        assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    }

    // A client without redirect URIs may not use the user grants.
    t.sb.register_client("machine-only", "s3cret", &[]);
    let r = t
        .form(&[
            ("grant_type", "refresh_token"),
            ("client_id", "machine-only"),
            ("client_secret", "s3cret"),
            ("refresh_token", "x"),
        ])
        .await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("unauthorized_client"))
    );

    // Basic with a wrong secret → 401 with a Basic challenge.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{id}:nope"));
    let r = t
        .http
        .post(t.url("/v1/oauth/token"))
        .header("authorization", format!("Basic {basic}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials")
        .send()
        .await
        .expect("send");
    let r = finish(r).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"], "invalid_client");
    assert!(r
        .header("www-authenticate")
        .is_some_and(|h| h.starts_with("Basic")));
    assert_eq!(t.sb.stats()["tokens_issued"]["client_credentials"], 0);
}

#[tokio::test]
async fn authorization_code_flow_rotation_and_reuse() {
    let t = start().await;
    let j = t.user_tokens().await;
    assert_eq!(j["scope"], "gca-aisp");
    assert_eq!(j["expires_in"], 3599);
    assert_eq!(j["token_type"], "Bearer");
    let access = j["access_token"].as_str().expect("access").to_owned();
    let r1 = j["refresh_token"].as_str().expect("refresh").to_owned();

    let r = t.get("/v1/gca/virtual-accounts", &access).await;
    assert_eq!(r.status, 200, "{}", r.text);

    let refresh = |rt: String| {
        let t = &t;
        async move {
            t.form(&[
                ("grant_type", "refresh_token"),
                ("client_id", t.sb.client_id()),
                ("client_secret", t.sb.client_secret()),
                ("refresh_token", &rt),
                ("scope", "gca-aisp"),
            ])
            .await
        }
    };
    let r = refresh(r1.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r2 = r.json()["refresh_token"]
        .as_str()
        .expect("rotated")
        .to_owned();
    assert_ne!(r1, r2);
    assert_eq!(r.json()["scope"], "gca-aisp");
    let new_access = r.json()["access_token"]
        .as_str()
        .expect("access")
        .to_owned();
    assert_eq!(
        t.get("/v1/gca/virtual-accounts", &new_access).await.status,
        200
    );

    // The used token is refused; the newest still works, then it is superseded too.
    let r = refresh(r1.clone()).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let r = refresh(r2.clone()).await;
    assert_eq!(r.status, 200);
    let r3 = r.json()["refresh_token"].as_str().expect("r3").to_owned();
    let r = refresh(r2).await;
    assert_eq!(r.json()["error"], "invalid_grant");
    // Scope other than gca-aisp on refresh → invalid_scope.
    let r = t
        .form(&[
            ("grant_type", "refresh_token"),
            ("client_id", t.sb.client_id()),
            ("client_secret", t.sb.client_secret()),
            ("refresh_token", &r3),
            ("scope", "payments"),
        ])
        .await;
    assert_eq!(r.json()["error"], "invalid_scope");
    // Another client cannot use it.
    t.sb.register_client(
        "other-app",
        "other-secret",
        &["https://other.example.test/cb"],
    );
    let r = t
        .form(&[
            ("grant_type", "refresh_token"),
            ("client_id", "other-app"),
            ("client_secret", "other-secret"),
            ("refresh_token", &r3),
        ])
        .await;
    assert_eq!(r.json()["error"], "invalid_grant");
    let issued = &t.sb.stats()["tokens_issued"];
    assert_eq!(issued["authorization_code"], 1);
    assert_eq!(issued["refresh_token"], 2);
}

async fn fresh_code(t: &Ctx, redirect: &str) -> String {
    let back =
        t.sb.approve(&t.auth_url(redirect, "s"), true)
            .await
            .expect("approve");
    query_param(&back, "code").expect("code")
}

#[tokio::test]
async fn code_is_single_use_bound_and_expires() {
    let t = start().await;
    let redirect = t.sb.redirect_uri().to_owned();
    let exchange = |code: String, redirect: String, id: &'static str| {
        let t = &t;
        async move {
            let (cid, secret) = if id == "default" {
                (t.sb.client_id().to_owned(), t.sb.client_secret().to_owned())
            } else {
                ("other-app".to_owned(), "other-secret".to_owned())
            };
            t.form(&[
                ("grant_type", "authorization_code"),
                ("client_id", &cid),
                ("client_secret", &secret),
                ("code", &code),
                ("redirect_uri", &redirect),
            ])
            .await
        }
    };

    // redirect_uri must be identical.
    let code = fresh_code(&t, &redirect).await;
    let r = exchange(
        code.clone(),
        "https://app.example.test/callback/".into(),
        "default",
    )
    .await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    // Bound to the client.
    t.sb.register_client(
        "other-app",
        "other-secret",
        &["https://app.example.test/callback"],
    );
    let r = exchange(code.clone(), redirect.clone(), "other").await;
    assert_eq!(r.json()["error"], "invalid_grant");
    // Works once, then reuse fails and revokes the tokens it gave.
    let r = exchange(code.clone(), redirect.clone(), "default").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let access = r.json()["access_token"].as_str().expect("a").to_owned();
    let refresh = r.json()["refresh_token"].as_str().expect("r").to_owned();
    assert_eq!(t.get("/v1/gca/virtual-accounts", &access).await.status, 200);
    let r = exchange(code, redirect.clone(), "default").await;
    assert_eq!(r.json()["error"], "invalid_grant");
    assert_eq!(t.get("/v1/gca/virtual-accounts", &access).await.status, 401);
    let r = t
        .form(&[
            ("grant_type", "refresh_token"),
            ("client_id", t.sb.client_id()),
            ("client_secret", t.sb.client_secret()),
            ("refresh_token", &refresh),
        ])
        .await;
    assert_eq!(r.json()["error"], "invalid_grant");

    // Codes live 600 s on the sandbox clock.
    let code = fresh_code(&t, &redirect).await;
    t.sb.advance(601.0);
    let r = exchange(code, redirect.clone(), "default").await;
    assert_eq!(r.json()["error"], "invalid_grant");
    assert!(r.json()["error_description"]
        .as_str()
        .is_some_and(|d| d.contains("expired")));

    // The custom-scheme URI works too.
    let native = "com.example.app:/oauth/callback";
    let back =
        t.sb.approve(&t.auth_url(native, "n1"), true)
            .await
            .expect("approve");
    assert!(
        back.starts_with("com.example.app:/oauth/callback?code="),
        "{back}"
    );
    assert_eq!(query_param(&back, "state").as_deref(), Some("n1"));
}

#[tokio::test]
async fn approve_allow_and_deny() {
    let t = start().await;
    let redirect = t.sb.redirect_uri().to_owned();
    let back =
        t.sb.approve(&t.auth_url(&redirect, "xyz<&>"), true)
            .await
            .expect("allow");
    assert!(
        back.starts_with("https://app.example.test/callback?"),
        "{back}"
    );
    assert_eq!(query_param(&back, "state").as_deref(), Some("xyz<&>"));
    assert!(query_param(&back, "code").is_some_and(|c| c.len() >= 32));
    let back =
        t.sb.approve(&t.auth_url(&redirect, "d1"), false)
            .await
            .expect("deny");
    assert_eq!(
        query_param(&back, "error").as_deref(),
        Some("access_denied")
    );
    assert_eq!(query_param(&back, "state").as_deref(), Some("d1"));
    assert!(query_param(&back, "code").is_none());
}

#[tokio::test]
async fn authorize_page_errors() {
    let t = start().await;
    let id = t.sb.client_id().to_owned();
    let page = |q: String| {
        let t = &t;
        async move {
            finish(
                t.http
                    .get(t.url(&format!("/v1/oauth/authorize?{q}")))
                    .send()
                    .await
                    .expect("send"),
            )
            .await
        }
    };
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    // Never a redirect for a bad client or redirect URI.
    for q in [
        format!(
            "response_type=code&client_id=nobody&redirect_uri={}&scope=gca-aisp&state=s",
            enc("https://app.example.test/callback")
        ),
        format!(
            "response_type=code&client_id={id}&redirect_uri={}&scope=gca-aisp&state=s",
            enc("https://evil.example/cb")
        ),
        format!("response_type=code&client_id={id}&scope=gca-aisp&state=s"),
        format!(
            "response_type=code&client_id={id}&redirect_uri={}&scope=gca-aisp",
            enc("http://app.example.test/callback")
        ),
    ] {
        let r = page(q.clone()).await;
        assert_eq!(r.status, 400, "{q}");
        assert!(r.header("location").is_none(), "{q}");
        assert!(r
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/html")));
        assert!(r.text.contains("<!DOCTYPE html>") && r.text.contains("id=\"error\""));
    }
    // Even when registered, an http:// redirect URI is refused.
    t.sb.register_client("weak-app", "x", &["http://weak.example.test/cb"]);
    let r = page(format!(
        "response_type=code&client_id=weak-app&redirect_uri={}&scope=gca-aisp",
        enc("http://weak.example.test/cb")
    ))
    .await;
    assert_eq!(r.status, 400);
    assert!(r.header("location").is_none());

    // After the redirect URI is validated, errors go back to it.
    let ru = enc("https://app.example.test/callback");
    for (q, error) in [
        (
            format!("response_type=token&client_id={id}&redirect_uri={ru}&scope=gca-aisp&state=s7"),
            "unsupported_response_type",
        ),
        (
            format!("client_id={id}&redirect_uri={ru}&scope=gca-aisp&state=s7"),
            "invalid_request",
        ),
        (
            format!("response_type=code&client_id={id}&redirect_uri={ru}&scope=payments&state=s7"),
            "invalid_scope",
        ),
        (
            format!("response_type=code&client_id={id}&redirect_uri={ru}&state=s7"),
            "invalid_scope",
        ),
    ] {
        let r = page(q.clone()).await;
        assert_eq!(r.status, 302, "{q}");
        let loc = r.header("location").expect("location");
        assert!(
            loc.starts_with("https://app.example.test/callback?"),
            "{loc}"
        );
        assert_eq!(query_param(&loc, "error").as_deref(), Some(error), "{q}");
        assert_eq!(query_param(&loc, "state").as_deref(), Some("s7"));
    }

    // The login page escapes what it echoes and has stable ids.
    let r = page(format!(
        "response_type=code&client_id={id}&redirect_uri={ru}&scope=gca-aisp&state={}",
        enc("\"><script>x</script>")
    ))
    .await;
    assert_eq!(r.status, 200);
    assert!(!r.text.contains("<script>x"));
    assert!(r.text.contains("&quot;&gt;&lt;script&gt;"));
    for needle in [
        "id=\"username\"",
        "name=\"password\"",
        "<label for=\"username\">",
        "action=\"/v1/oauth/login\"",
    ] {
        assert!(r.text.contains(needle), "{needle}");
    }
}

#[tokio::test]
async fn login_and_consent_pages() {
    let t = start().await;
    let ru = t.sb.redirect_uri().to_owned();
    let form = |path: &str, pairs: Vec<(&'static str, String)>, cookie: Option<String>| {
        let t = &t;
        let path = path.to_owned();
        async move {
            let body = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())))
                .finish();
            let mut req = t
                .http
                .post(t.url(&path))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body);
            if let Some(c) = cookie {
                req = req.header("cookie", c);
            }
            finish(req.send().await.expect("send")).await
        }
    };
    let base = |user: &str, pw: &str| {
        vec![
            ("response_type", "code".to_owned()),
            ("client_id", t.sb.client_id().to_owned()),
            ("redirect_uri", ru.clone()),
            ("scope", "gca-aisp".to_owned()),
            ("state", "abc".to_owned()),
            ("username", user.to_owned()),
            ("password", pw.to_owned()),
        ]
    };
    let r = form("/v1/oauth/login", base(t.sb.username(), "wrong"), None).await;
    assert_eq!(r.status, 401);
    assert!(r.text.contains("Invalid username or password") && r.text.contains("id=\"password\""));

    let r = form(
        "/v1/oauth/login",
        base(t.sb.username(), t.sb.password()),
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(
        r.text.contains("id=\"allow\"")
            && r.text.contains("id=\"deny\"")
            && r.text.contains("name=\"decision\"")
    );
    let cookie = r
        .header("set-cookie")
        .and_then(|c| c.split(';').next().map(str::to_owned))
        .expect("cookie");
    let consent_id = r
        .text
        .split("name=\"consent_id\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("consent id")
        .to_owned();
    // Without the login cookie the consent is refused (and stays usable).
    let r = form(
        "/v1/oauth/consent",
        vec![
            ("consent_id", consent_id.clone()),
            ("decision", "allow".into()),
        ],
        None,
    )
    .await;
    assert_eq!(r.status, 403);
    let r = form(
        "/v1/oauth/consent",
        vec![
            ("consent_id", consent_id.clone()),
            ("decision", "allow".into()),
        ],
        Some(cookie.clone()),
    )
    .await;
    assert_eq!(r.status, 302);
    let loc = r.header("location").expect("location");
    assert_eq!(query_param(&loc, "state").as_deref(), Some("abc"));
    assert!(query_param(&loc, "code").is_some());
    // Answered once only.
    let r = form(
        "/v1/oauth/consent",
        vec![("consent_id", consent_id), ("decision", "allow".into())],
        Some(cookie),
    )
    .await;
    assert_eq!(r.status, 404);
    assert!(r.header("location").is_none());
    // A login form without a password is refused before anything else.
    let mut no_pw = base(t.sb.username(), "");
    no_pw.retain(|(k, _)| *k != "password");
    let r = form("/v1/oauth/login", no_pw, None).await;
    assert_eq!(r.status, 400);
    assert!(r.header("location").is_none());
    // Wrong content type on the login form → HTML error page.
    let r = finish(
        t.http
            .post(t.url("/v1/oauth/login"))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.text.contains("<!DOCTYPE html>"));
}

#[tokio::test]
async fn scopes_and_bearer_errors() {
    let t = start().await;
    let cc = t.cc_token().await;
    let user = t.user_tokens().await["access_token"]
        .as_str()
        .expect("a")
        .to_owned();

    // Wrong scope → 403.
    let r = t.get("/v1/gca/virtual-accounts", &cc).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.codes(), ["auth:scope:4003"]);
    assert!(r
        .header("www-authenticate")
        .is_some_and(|h| h.contains("insufficient_scope")));
    let q =
        serde_json::json!({"buyCurrency": "GBP", "buyAmount": num("10"), "sellCurrency": "USD"});
    let r = t.post_json("/v1/payments/quotes", &user, &q).await;
    assert_eq!(r.status, 403);

    // Missing and invalid tokens → 401 with a Bearer challenge.
    let r = finish(
        t.http
            .get(t.url("/v1/gca/virtual-accounts"))
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.codes(), ["auth:token:4001"]);
    assert!(r
        .header("www-authenticate")
        .is_some_and(|h| h.contains("Bearer") && h.contains("invalid_token")));
    let r = t.post_json("/v1/payments/quotes", "not-a-token", &q).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.codes(), ["auth:token:4002"]);

    // Tokens expire after 3599 s on the sandbox clock.
    assert_eq!(
        t.post_json("/v1/payments/quotes", &cc, &q).await.status,
        201
    );
    t.sb.advance(3598.0);
    assert_eq!(
        t.post_json("/v1/payments/quotes", &cc, &q).await.status,
        201
    );
    t.sb.advance(2.0);
    let r = t.post_json("/v1/payments/quotes", &cc, &q).await;
    assert_eq!(r.status, 401);
    assert!(r.json()["errors"][0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("expired")));
    assert_eq!(t.get("/v1/gca/virtual-accounts", &user).await.status, 401);
}

#[tokio::test]
async fn refresh_token_expires_after_thirty_days() {
    let t = start().await;
    let j = t.user_tokens().await;
    let rt = j["refresh_token"].as_str().expect("rt").to_owned();
    t.sb.advance(2_592_000.0 + 1.0);
    let r = t
        .form(&[
            ("grant_type", "refresh_token"),
            ("client_id", t.sb.client_id()),
            ("client_secret", t.sb.client_secret()),
            ("refresh_token", &rt),
        ])
        .await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("invalid_grant"))
    );
}
