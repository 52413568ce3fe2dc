"""fxpay.parse_deal_created, and the FastAPI and Django receivers served over real HTTP."""

from __future__ import annotations

import json
import pickle
import sys
import types
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

import httpx
import pytest

import fxpay
from fxpay import DealCreated, FieldError, WebhookPayloadError, WebhookVerificationError

from conftest import need
from webhook_support import DID, NONCE, OTHER_PID, PID, Recorder, dumps, fail, post, serve_django, serve_fastapi, success

MIB = 1_048_576


def refused(body: Any, match: str, **kw: Any) -> WebhookPayloadError:
    with pytest.raises(WebhookPayloadError) as info:
        fxpay.parse_deal_created(body, **kw)
    assert str(info.value) == match or str(info.value).startswith(match), str(info.value)
    return info.value


# --------------------------------------------------------------------------- parsing


def test_success_event() -> None:
    ev = fxpay.parse_deal_created(dumps(success()))
    assert isinstance(ev, DealCreated)
    assert (ev.status, ev.ok, ev.process_id, ev.deal_id, ev.errors) == ("success", True, PID, DID, [])
    assert ev == DealCreated("success", PID, DID, [])
    assert ev.to_dict() == success()


ERR = FieldError("validation:beneficiary:1004", "PaymentReason", "Payment reason must not be empty")


@pytest.mark.parametrize(
    ("args", "field", "body"),
    [
        (("success", "p-1", DID, []), "process_id", success(pid="p-1")),
        (("success", PID, None, []), "deal_id", None),
        (("success", PID, "d-1", []), "deal_id", success(dealId="d-1")),
        (("success", PID, DID, [ERR]), "errors", None),
        (("fail", PID, DID, [ERR]), "deal_id", None),
        (("fail", PID, None, []), "errors", None),
        (("fail", "not-a-uuid", None, [ERR]), "process_id", None),
        (("fail", PID, None, [FieldError("a:b:1", None, "m")]), "field_name", None),
    ],
)
def test_the_constructor_checks_what_the_parser_checks(args: tuple[Any, ...], field: str, body: Any) -> None:
    with pytest.raises(fxpay.InvalidRequestError, match=field):
        DealCreated(*args)
    if body is not None:
        with pytest.raises(WebhookPayloadError):
            fxpay.parse_deal_created(dumps(body))
    # What the constructor accepts, the parser accepts too, and the other way round.
    for good in (DealCreated("success", PID, DID, []), DealCreated("fail", PID, None, [ERR])):
        assert fxpay.parse_deal_created(json.dumps(good.to_dict())) == good


def test_fail_event_with_parsed_error_codes() -> None:
    body = fail(n=2)
    body["eventBody"]["errors"][1]["errorCode"] = "not-three-parts"
    ev = fxpay.parse_deal_created(dumps(body))
    assert (ev.status, ev.ok, ev.deal_id) == ("fail", False, None)
    assert ev.errors == [
        FieldError("validation:beneficiary:1004", "PaymentReason", "Payment reason must not be empty"),
        FieldError("not-three-parts", "PaymentReason", "Payment reason must not be empty"),
    ]
    assert [(e.layer, e.component, e.number) for e in ev.errors] == [("validation", "beneficiary", 1004), (None, None, None)]
    assert isinstance(ev.errors, list)  # API.md: errors: list[fxpay.FieldError]
    assert hash(ev) == hash(fxpay.parse_deal_created(dumps(body)))
    assert ev.to_dict() == body


def test_instances_match_the_constructor_and_pickle() -> None:
    for body in (success(), fail(n=2)):
        ev = fxpay.parse_deal_created(dumps(body))
        assert DealCreated.__match_args__ == ("status", "process_id", "deal_id", "errors")
        for e in ev.errors:
            assert FieldError(*(getattr(e, f) for f in FieldError.__match_args__)) == e
        rebuilt = DealCreated(*(getattr(ev, f) for f in DealCreated.__match_args__))
        assert ev == rebuilt
        assert repr(ev) == repr(rebuilt)
        assert hash(ev) == hash(rebuilt)
        assert pickle.loads(pickle.dumps(ev)) == ev
        with pytest.raises(AttributeError):
            ev.status = "fail"  # type: ignore[misc]


def test_raw_is_the_whole_json_with_exact_numbers_and_unknown_fields() -> None:
    text = (
        '{"status":"success","eventType":"DealCreated","extra":{"amount":1520.50,'
        '"big":123456789012345678901234567890,"small":-7,"exp":1e400,"list":[true,null,"x"]},'
        f'"eventBody":{{"processId":"{PID}","dealId":"{DID}","note":"hi"}}}}'
    )
    ev = fxpay.parse_deal_created(text)
    assert ev.raw == json.loads(text, parse_float=Decimal)
    assert list(ev.raw) == ["status", "eventType", "extra", "eventBody"]
    amount = ev.raw["extra"]["amount"]
    assert isinstance(amount, Decimal)
    assert str(amount) == "1520.50"
    assert ev.raw["extra"]["big"] == 123456789012345678901234567890
    assert ev.raw["eventBody"]["note"] == "hi"


@pytest.mark.parametrize("as_text", [False, True])
def test_raw_is_built_on_first_use_as_a_new_dict_each_time(as_text: bool) -> None:
    data = dumps(success())[:-1] + b',"amount":10.50}'
    body: bytes | str = data.decode() if as_text else data
    ev = fxpay.parse_deal_created(body)
    copied = pickle.loads(pickle.dumps(ev))
    raw = ev.raw
    assert raw == json.loads(data, parse_float=Decimal)
    assert ev.raw is not raw  # a new dict each time (issue 23 item 3): edits stay in it
    raw["status"] = "fail"
    assert ev.raw == json.loads(data, parse_float=Decimal)
    assert copied.raw == ev.raw
    assert copied == ev
    assert fxpay.to_records([ev])[0]["process_id"] == PID
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ev.nope  # noqa: B018
    assert DealCreated("success", PID, DID).raw == {}


def test_str_and_bytes_bodies_are_the_same() -> None:
    text = json.dumps(success(label="naïve ☃"), ensure_ascii=False)
    assert fxpay.parse_deal_created(text) == fxpay.parse_deal_created(text.encode())
    assert fxpay.parse_deal_created(text).raw["eventBody"]["label"] == "naïve ☃"


@pytest.mark.parametrize("body", [bytearray(b"{}"), memoryview(b"{}"), 12, None, {"status": "success"}])
def test_other_body_types_are_a_type_error(body: Any) -> None:
    with pytest.raises(TypeError, match="body must be bytes or str"):
        fxpay.parse_deal_created(body)


def test_uppercase_uuids_are_kept_as_sent() -> None:
    ev = fxpay.parse_deal_created(dumps(success(pid=PID.upper())))
    assert ev.process_id == PID.upper()


def test_success_may_carry_null_or_empty_errors_and_fail_a_null_deal_id() -> None:
    assert fxpay.parse_deal_created(dumps(success(errors=[]))).ok
    assert fxpay.parse_deal_created(dumps(success(errors=None))).ok
    body = fail()
    body["eventBody"]["dealId"] = None
    assert not fxpay.parse_deal_created(dumps(body)).ok


# size


def test_a_body_of_exactly_one_mib_is_accepted_one_more_byte_is_not() -> None:
    base = dumps(success(pad=""))
    body = dumps(success(pad="a" * (MIB - len(base))))
    assert len(body) == MIB
    assert fxpay.parse_deal_created(body).raw["eventBody"]["pad"].startswith("aaa")
    over = dumps(success(pad="a" * (MIB - len(base) + 1)))
    refused(over, f"the body is {MIB + 1} bytes, over the limit")


def test_the_size_cap_comes_before_parsing_and_verification() -> None:
    # Not JSON, and no nonce header: still the size is what is refused.
    refused(b"x" * (MIB + 1), "the body is", headers={}, nonce=NONCE)
    refused("x" * (10 * MIB), "the body is")


def test_the_size_cap_counts_utf8_bytes_of_a_str() -> None:
    text = json.dumps(success(pad="é" * (MIB // 2)), ensure_ascii=False)
    assert len(text) < MIB < len(text.encode())
    refused(text, "the body is")


# encoding and syntax


def test_invalid_utf8_and_lone_surrogates() -> None:
    refused(b'{"status":"\xff"}', "the body is not valid UTF-8")
    refused('{"status":"\ud800"}', "the body is not valid UTF-8")


@pytest.mark.parametrize("body", [b"", b"{", b"nope", b'{"a":1}x', "\ufeff{}".encode(), b"[" * 100_000])
def test_not_json(body: bytes) -> None:
    refused(body, "the body is not valid JSON")


@pytest.mark.parametrize("body", [b"[]", b"1", b'"DealCreated"', b"null", b"true"])
def test_not_an_object(body: bytes) -> None:
    refused(body, "the body is not a JSON object")


# schema


def without(ev: dict[str, Any], *path: str) -> dict[str, Any]:
    target = ev
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return ev


def with_(ev: dict[str, Any], value: Any, *path: str | int) -> dict[str, Any]:
    target: Any = ev
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return ev


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (without(success(), "eventType"), "eventType is missing"),
        (with_(success(), 1, "eventType"), "eventType is not a string"),
        (with_(success(), "DealUpdated", "eventType"), 'eventType is not "DealCreated"'),
        (without(success(), "status"), "status is missing"),
        (with_(success(), None, "status"), "status is not a string"),
        (with_(success(), "SUCCESS", "status"), 'status is neither "success" nor "fail"'),
        (without(success(), "eventBody"), "eventBody is missing"),
        (with_(success(), [], "eventBody"), "eventBody is not an object"),
        (with_(success(), 5, "eventBody"), "eventBody is not an object"),
        (without(success(), "eventBody", "processId"), "eventBody.processId is missing"),
        (with_(success(), 12, "eventBody", "processId"), "eventBody.processId is not a string"),
        (with_(success(), "nope", "eventBody", "processId"), "eventBody.processId is not a UUID"),
        (with_(success(), PID.replace("-", ""), "eventBody", "processId"), "eventBody.processId is not a UUID"),
        (with_(success(), f"{{{PID}}}", "eventBody", "processId"), "eventBody.processId is not a UUID"),
        (with_(success(), f"urn:uuid:{PID}", "eventBody", "processId"), "eventBody.processId is not a UUID"),
        (with_(fail(), "x" + PID[1:].replace("5", "z"), "eventBody", "processId"), "eventBody.processId is not a UUID"),
        (without(success(), "eventBody", "dealId"), "eventBody.dealId is missing"),
        (with_(success(), None, "eventBody", "dealId"), "eventBody.dealId is not a string"),
        (with_(success(), "", "eventBody", "dealId"), "eventBody.dealId is not a UUID"),
        (with_(success(), fail()["eventBody"]["errors"], "eventBody", "errors"), "eventBody.errors must be absent or empty"),
        (with_(fail(), DID, "eventBody", "dealId"), 'eventBody.dealId must be absent when status is "fail"'),
        (without(fail(), "eventBody", "errors"), "eventBody.errors is missing"),
        (with_(fail(), {}, "eventBody", "errors"), "eventBody.errors is not an array"),
        (with_(fail(), None, "eventBody", "errors"), "eventBody.errors is not an array"),
        (with_(fail(), [], "eventBody", "errors"), "eventBody.errors is empty"),
        (with_(fail(n=2), "x", "eventBody", "errors", 1), "eventBody.errors[1] is not an object"),
        (without(fail(), "eventBody", "errors", 0, "errorCode"), "eventBody.errors[0].errorCode is missing"),
        (without(fail(), "eventBody", "errors", 0, "fieldName"), "eventBody.errors[0].fieldName is missing"),
        (without(fail(), "eventBody", "errors", 0, "message"), "eventBody.errors[0].message is missing"),
        (with_(fail(), 1004, "eventBody", "errors", 0, "errorCode"), "eventBody.errors[0].errorCode is not a string"),
        (with_(fail(), None, "eventBody", "errors", 0, "fieldName"), "eventBody.errors[0].fieldName is not a string"),
        (with_(fail(), ["m"], "eventBody", "errors", 0, "message"), "eventBody.errors[0].message is not a string"),
    ],
)
def test_schema_refusals_name_the_field(event: dict[str, Any], message: str) -> None:
    refused(dumps(event), message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"status":"fail","status":"success","eventType":"DealCreated","eventBody":{"processId":"%s","x":"%s","dealId":"%s"}}',
            "the key status appears more than once",
        ),
        (
            '{"status":"success","eventType":"DealCreated","eventBody":{"processId":"%s","processId":"%s","dealId":"%s"}}',
            "the key eventBody.processId appears more than once",
        ),
    ],
)
def test_duplicate_keys_are_refused_where_they_are_interpreted(text: str, message: str) -> None:
    refused(text % (PID, OTHER_PID, DID), message)


def test_duplicate_keys_inside_unknown_values_keep_the_last() -> None:
    text = dumps(success())[:-1] + b',"x":{"a":1,"a":2}}'
    assert fxpay.parse_deal_created(text).raw["x"] == {"a": 2}


# nonce


class Multi(Mapping[str, str]):
    """A mapping whose items() may repeat a name, as Starlette's Headers can."""

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> str:
        return dict(self._items)[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._items))

    def __len__(self) -> int:
        return len(dict(self._items))

    def items(self) -> Any:  # type: ignore[override]
        return list(self._items)


@pytest.mark.parametrize("name", ["callback-nonce", "Callback-Nonce", "CALLBACK-NONCE", "cAlLbAcK-nOnCe"])
def test_the_nonce_header_is_found_in_any_case(name: str) -> None:
    headers = {"content-type": "application/json", name: NONCE}
    assert fxpay.parse_deal_created(dumps(success()), headers, nonce=NONCE).ok


def test_headers_may_be_any_mapping() -> None:
    from django.http.request import HttpHeaders
    from starlette.datastructures import Headers

    body = dumps(success())
    starlette = Headers(raw=[(b"content-type", b"application/json"), (b"callback-nonce", NONCE.encode())])
    django = HttpHeaders({"HTTP_CALLBACK_NONCE": NONCE, "CONTENT_TYPE": "application/json"})
    for headers in (starlette, django, Multi([("Callback-Nonce", NONCE)]), types.MappingProxyType({"callback-nonce": NONCE})):
        assert fxpay.parse_deal_created(body, headers, nonce=NONCE).process_id == PID


def test_headers_are_ignored_without_a_nonce() -> None:
    body = dumps(success())
    assert fxpay.parse_deal_created(body, {"callback-nonce": "whatever"}).ok
    assert fxpay.parse_deal_created(body, Multi([("callback-nonce", "a"), ("callback-nonce", "b")])).ok


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        (None, "the callback-nonce header is missing"),
        ({}, "the callback-nonce header is missing"),
        ({"x-callback-nonce": NONCE}, "the callback-nonce header is missing"),
        ({"callback-nonce": "forged"}, "the callback-nonce does not match"),
        ({"callback-nonce": NONCE[:-1]}, "the callback-nonce does not match"),
        ({"callback-nonce": NONCE + "x"}, "the callback-nonce does not match"),
        ({"callback-nonce": NONCE.upper()}, "the callback-nonce does not match"),
        ({"callback-nonce": f" {NONCE}"}, "the callback-nonce does not match"),
        ({"callback-nonce": ""}, "the callback-nonce does not match"),
        (Multi([("callback-nonce", NONCE), ("Callback-Nonce", NONCE)]), "the callback-nonce header appears more than once"),
        (Multi([("callback-nonce", "forged"), ("callback-nonce", NONCE)]), "the callback-nonce header appears more than once"),
    ],
)
def test_verification_failures_never_show_either_nonce(headers: Any, message: str) -> None:
    with pytest.raises(WebhookVerificationError) as info:
        fxpay.parse_deal_created(dumps(success()), headers, nonce=NONCE)
    e = info.value
    assert isinstance(e, fxpay.WebhookError)
    assert isinstance(e, fxpay.FxPayError)
    assert str(e) == message
    shown = f"{e} {e!r} {e.args!r} {e.message}"
    assert NONCE not in shown
    assert NONCE[:-1] not in shown
    assert "forged" not in shown


def test_an_empty_expected_nonce_is_refused() -> None:
    with pytest.raises(WebhookVerificationError, match="empty"):
        fxpay.parse_deal_created(dumps(success()), {"callback-nonce": ""}, nonce="")


def test_verification_comes_before_the_schema() -> None:
    with pytest.raises(WebhookVerificationError):
        fxpay.parse_deal_created(b"not json", {"callback-nonce": "forged"}, nonce=NONCE)


def test_header_names_and_values_must_be_str() -> None:
    with pytest.raises(TypeError, match="header values must be str"):
        fxpay.parse_deal_created(dumps(success()), {"callback-nonce": NONCE.encode()}, nonce=NONCE)
    with pytest.raises(TypeError, match="header names must be str"):
        fxpay.parse_deal_created(dumps(success()), {b"callback-nonce": NONCE}, nonce=NONCE)


def test_payload_errors_do_not_show_the_nonce_either() -> None:
    with pytest.raises(WebhookPayloadError) as info:
        fxpay.parse_deal_created(dumps(with_(success(), NONCE, "status")), {"callback-nonce": NONCE}, nonce=NONCE)
    assert NONCE not in f"{info.value} {info.value!r}"


# --------------------------------------------------------------------------- receivers


@pytest.fixture(params=["fastapi", "django"])
def receiver(request: pytest.FixtureRequest) -> Iterator[tuple[httpx.Client, Recorder]]:
    rec = Recorder()
    serve = serve_fastapi if request.param == "fastapi" else serve_django
    gen = serve(rec)
    base = next(gen)
    with httpx.Client(base_url=base, timeout=10, trust_env=False) as http:
        yield http, rec
    gen.close()


def test_receiver_accepts_a_success_event(receiver: tuple[httpx.Client, Recorder]) -> None:
    http, rec = receiver
    r = post(http, "/fixed", success(), name="Callback-Nonce")
    assert (r.status_code, r.json()) == (200, {"ok": True})
    assert [(e.status, e.process_id, e.deal_id) for e in rec.events] == [("success", PID, DID)]


def test_receiver_accepts_a_fail_event(receiver: tuple[httpx.Client, Recorder]) -> None:
    http, rec = receiver
    r = post(http, "/fixed", fail(n=2))
    assert (r.status_code, r.json()) == (200, {"ok": True})
    (ev,) = rec.events
    assert not ev.ok
    assert [e.number for e in ev.errors] == [1004, 1005]


@pytest.mark.parametrize("nonce", ["forged", None, NONCE + "x", ""])
def test_receiver_refuses_a_forged_or_missing_nonce(receiver: tuple[httpx.Client, Recorder], nonce: str | None) -> None:
    http, rec = receiver
    r = post(http, "/fixed", success(), nonce=nonce)
    assert r.status_code == 401
    assert r.json()["ok"] is False
    assert "callback-nonce" in r.json()["error"]
    assert NONCE not in r.text
    assert rec.events == []


@pytest.mark.parametrize(
    "body",
    [
        dumps(success())[:-5],  # truncated
        dumps(with_(success(), "not-a-uuid", "eventBody", "dealId")),
        dumps(with_(success(), "fail", "status")),  # a fail event without errors
        b'{"status":"success","status":"success"}',
    ],
)
def test_receiver_refuses_a_tampered_body(receiver: tuple[httpx.Client, Recorder], body: bytes) -> None:
    http, rec = receiver
    r = post(http, "/fixed", body)
    assert r.status_code == 400
    assert r.json()["ok"] is False
    assert rec.events == []


def test_receiver_refuses_a_body_over_one_mib(receiver: tuple[httpx.Client, Recorder]) -> None:
    http, rec = receiver
    r = post(http, "/fixed", dumps(success(pad="a" * MIB)))
    assert r.status_code == 400
    assert "1 MiB" in r.json()["error"]
    assert rec.events == []


def asgi_post(app: Any, chunks: list[bytes]) -> tuple[int, int]:
    """POSTs a body to an ASGI app in the given pieces, as a server hands them over; returns
    the answer's status and how many pieces the app asked for."""
    import asyncio

    pulled = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        if pulled == len(chunks):
            return {"type": "http.disconnect"}
        pulled += 1
        return {"type": "http.request", "body": chunks[pulled - 1], "more_body": pulled < len(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/fxpay/deal-created",
        "raw_path": b"/fxpay/deal-created",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"callback-nonce", NONCE.encode())],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(app(scope, receive, send))
    return int(sent[0]["status"]), pulled


def test_the_fastapi_receiver_reads_a_body_in_pieces_and_no_further_than_past_one_mib() -> None:
    need("fastapi")
    from fastapi import FastAPI

    from fxpay.contrib.fastapi import deal_created_router

    events: list[DealCreated] = []
    app = FastAPI()
    app.include_router(deal_created_router(nonce=NONCE, on_event=events.append))
    # An event that arrives in many pieces is read whole.
    body = dumps(success())
    assert asgi_post(app, [body[i : i + 7] for i in range(0, len(body), 7)]) == (200, -(-len(body) // 7))
    assert [e.process_id for e in events] == [PID]
    # A body past 1 MiB is refused after its first byte past the limit: the pieces after it
    # are never read (16 pieces of 64 KiB are 1 MiB exactly; the 17th goes past it).
    piece = b"x" * 65536
    assert asgi_post(app, [piece] * 40) == (400, 17)
    assert len(events) == 1


def test_receiver_answers_500_when_on_event_raises(receiver: tuple[httpx.Client, Recorder]) -> None:
    http, _ = receiver
    r = post(http, "/boom", success())
    assert r.status_code == 500
    assert r.json() == {"ok": False, "error": "the event handler failed"}
    assert "database is down" not in r.text


def test_receiver_awaits_an_async_on_event(receiver: tuple[httpx.Client, Recorder]) -> None:
    http, rec = receiver
    r = post(http, "/async", fail())
    assert r.status_code == 200
    assert [e.status for e in rec.events] == ["fail"]


@pytest.mark.parametrize("path", ["/lookup", "/lookup-async"])
def test_receiver_looks_the_nonce_up_by_process_id(receiver: tuple[httpx.Client, Recorder], path: str) -> None:
    http, rec = receiver
    assert post(http, path, success(pid=OTHER_PID), nonce="other-" + NONCE).status_code == 200
    assert post(http, path, fail(pid=PID), nonce=NONCE).status_code == 200
    # The right nonce of another process is still wrong.
    assert post(http, path, success(pid=PID), nonce="other-" + NONCE).status_code == 401
    unknown = "11111111-2222-4333-8444-555555555555"
    r = post(http, path, success(pid=unknown), nonce=NONCE)
    assert r.status_code == 401
    assert "no callback-nonce is known" in r.json()["error"]
    assert post(http, path, b"{not json", nonce=NONCE).status_code == 400
    assert [e.process_id for e in rec.events] == [OTHER_PID, PID]
    assert rec.lookups == [OTHER_PID, PID, PID, unknown]


def test_receiver_answers_500_when_the_lookup_raises(receiver: tuple[httpx.Client, Recorder]) -> None:
    http, rec = receiver
    r = post(http, "/lookup-boom", success())
    assert r.status_code == 500
    assert "lookup failed" in r.json()["error"]
    assert rec.events == []


def test_receiver_takes_post_only(receiver: tuple[httpx.Client, Recorder]) -> None:
    http, rec = receiver
    assert http.get("/fixed").status_code == 405
    assert http.put("/fixed", content=dumps(success()), headers={"callback-nonce": NONCE}).status_code == 405
    assert rec.events == []


def test_receivers_want_exactly_one_nonce_setting() -> None:
    from fxpay.contrib.django import deal_created_view
    from fxpay.contrib.fastapi import deal_created_router

    for make in (deal_created_router, deal_created_view):
        with pytest.raises(fxpay.ConfigurationError, match="exactly one"):
            make(on_event=print)
        with pytest.raises(fxpay.ConfigurationError, match="exactly one"):
            make(nonce=NONCE, nonce_for=dict().get, on_event=print)
        with pytest.raises(fxpay.ConfigurationError, match="empty"):
            make(nonce="", on_event=print)


def test_the_framework_modules_are_optional() -> None:
    import subprocess

    code = "import sys, fxpay, fxpay.contrib; assert 'fastapi' not in sys.modules and 'django' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
