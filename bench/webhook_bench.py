"""Events per second of ``fxpay.parse_deal_created`` against a pure-Python baseline.

Both sides do the same work on the same mixed bodies, in the same run: the 1 MiB cap, the
``callback-nonce`` header looked up case-insensitively and compared in constant time
(``hmac.compare_digest``), ``json.loads`` with exact decimals, the strict spec 6.2 schema
checks including ``uuid.UUID`` on the ids, and a frozen ``DealCreated`` dataclass holding
``FieldError`` dataclasses (with the parsed ``layer:component:number`` parts) and ``raw``.
The baseline does not look for duplicate keys (fxpay does), so it does a little less.

    python bench/webhook_bench.py [--seconds 2.0] [--repeats 5]
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import json
import random
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import fxpay

MAX_BODY_BYTES = 1_048_576
NONCE = "kq3V0cHn8wY2r5Jb1tX7pLmA4sZ9dE6f"


class PayloadError(Exception):
    pass


class VerificationError(Exception):
    pass


@dataclass(frozen=True)
class PyFieldError:
    error_code: str
    field_name: str | None
    message: str
    layer: str | None = None
    component: str | None = None
    number: int | None = None


@dataclass(frozen=True)
class PyDealCreated:
    status: str
    process_id: str
    deal_id: str | None
    errors: tuple[PyFieldError, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _string(obj: dict[str, Any], key: str, path: str) -> str:
    if key not in obj:
        raise PayloadError(f"{path} is missing")
    value = obj[key]
    if not isinstance(value, str):
        raise PayloadError(f"{path} is not a string")
    return value


def _uuid(obj: dict[str, Any], key: str, path: str) -> str:
    value = _string(obj, key, path)
    if len(value) != 36:
        raise PayloadError(f"{path} is not a UUID")
    try:
        uuid.UUID(value)
    except ValueError:
        raise PayloadError(f"{path} is not a UUID") from None
    return value


def _field_error(i: int, item: Any) -> PyFieldError:
    if not isinstance(item, dict):
        raise PayloadError(f"eventBody.errors[{i}] is not an object")
    code = _string(item, "errorCode", f"eventBody.errors[{i}].errorCode")
    name = _string(item, "fieldName", f"eventBody.errors[{i}].fieldName")
    message = _string(item, "message", f"eventBody.errors[{i}].message")
    parts = code.split(":")
    if len(parts) == 3 and parts[0] and parts[1] and parts[2].isascii() and parts[2].isdigit() and int(parts[2]) < 2**32:
        return PyFieldError(code, name, message, parts[0], parts[1], int(parts[2]))
    return PyFieldError(code, name, message)


def py_parse_deal_created(body: bytes | str, headers: Any = None, *, nonce: str | None = None) -> PyDealCreated:
    if isinstance(body, str):
        body = body.encode()
    if len(body) > MAX_BODY_BYTES:
        raise PayloadError("the body is over 1 MiB")
    if nonce is not None:
        found = [v for k, v in (headers or {}).items() if k.lower() == "callback-nonce"]
        if not found:
            raise VerificationError("the callback-nonce header is missing")
        if len(found) > 1:
            raise VerificationError("the callback-nonce header appears more than once")
        if not hmac.compare_digest(found[0].encode(), nonce.encode()):
            raise VerificationError("the callback-nonce does not match")
    try:
        data = json.loads(body, parse_float=Decimal)
    except (ValueError, UnicodeDecodeError):
        raise PayloadError("the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise PayloadError("the body is not a JSON object")
    if _string(data, "eventType", "eventType") != "DealCreated":
        raise PayloadError('eventType is not "DealCreated"')
    status = _string(data, "status", "status")
    if status not in ("success", "fail"):
        raise PayloadError('status is neither "success" nor "fail"')
    body_obj = data.get("eventBody")
    if body_obj is None and "eventBody" not in data:
        raise PayloadError("eventBody is missing")
    if not isinstance(body_obj, dict):
        raise PayloadError("eventBody is not an object")
    process_id = _uuid(body_obj, "processId", "eventBody.processId")
    if status == "success":
        deal_id = _uuid(body_obj, "dealId", "eventBody.dealId")
        if body_obj.get("errors") not in (None, []):
            raise PayloadError("eventBody.errors must be absent or empty")
        return PyDealCreated(status, process_id, deal_id, (), data)
    if body_obj.get("dealId") is not None:
        raise PayloadError("eventBody.dealId must be absent")
    if "errors" not in body_obj:
        raise PayloadError("eventBody.errors is missing")
    errors = body_obj["errors"]
    if not isinstance(errors, list):
        raise PayloadError("eventBody.errors is not an array")
    if not errors:
        raise PayloadError("eventBody.errors is empty")
    return PyDealCreated(status, process_id, None, tuple(_field_error(i, e) for i, e in enumerate(errors)), data)


def make_bodies(n: int, seed: int = 7) -> list[tuple[bytes, dict[str, str]]]:
    """A fixed mix: 60 % success, 30 % fail (1 to 3 errors), 10 % refused bodies."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        pid = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
        kind = i % 10
        if kind < 6:
            ev: dict[str, Any] = {
                "status": "success",
                "eventType": "DealCreated",
                "eventBody": {"processId": pid, "dealId": str(uuid.UUID(int=rnd.getrandbits(128), version=4))},
            }
            if kind == 5:
                ev["eventBody"]["settlement"] = {"amount": Decimal("1520.75"), "currency": "EUR"}
        elif kind < 9:
            ev = {
                "status": "fail",
                "eventType": "DealCreated",
                "eventBody": {
                    "processId": pid,
                    "errors": [
                        {
                            "errorCode": f"validation:beneficiary:{1000 + j}",
                            "fieldName": "PaymentReason",
                            "message": "Payment reason must not be empty",
                        }
                        for j in range(1 + kind - 6)
                    ],
                },
            }
        else:
            ev = {"status": "success", "eventType": "DealCreated", "eventBody": {"processId": pid, "dealId": "not-a-uuid"}}
        body = json.dumps(ev, default=str, separators=(",", ":")).encode()
        headers = {
            "host": "merchant.example",
            "user-agent": "DealNotifier/1.0",
            "content-type": "application/json",
            "content-length": str(len(body)),
            "Callback-Nonce": NONCE,
            "x-request-id": str(i),
        }
        out.append((body, headers))
    return out


def rate(fn: Callable[..., Any], bodies: list[tuple[bytes, dict[str, str]]], seconds: float) -> float:
    done = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for body, headers in bodies:
            with contextlib.suppress(Exception):
                fn(body, headers, nonce=NONCE)
        done += len(bodies)
        now = time.perf_counter()
        if now >= deadline:
            return done / (now - start)


def parse_and_read_raw(body: bytes, headers: dict[str, str], *, nonce: str) -> Any:
    """fxpay, then reading ``.raw`` (decoded on first use), for the rate of receivers that need it."""
    return fxpay.parse_deal_created(body, headers, nonce=nonce).raw


def check_same_results(bodies: list[tuple[bytes, dict[str, str]]]) -> None:
    """Both sides accept and refuse the same bodies and read the same values."""
    for body, headers in bodies:
        try:
            ours = fxpay.parse_deal_created(body, headers, nonce=NONCE)
        except fxpay.WebhookPayloadError:
            ours = None
        try:
            theirs = py_parse_deal_created(body, headers, nonce=NONCE)
        except PayloadError:
            theirs = None
        if (ours is None) != (theirs is None):
            raise SystemExit(f"the two sides disagree on {body!r}")
        if ours is None or theirs is None:
            continue
        a = (
            ours.status,
            ours.process_id,
            ours.deal_id,
            [e.to_dict() | {"parts": (e.layer, e.component, e.number)} for e in ours.errors],
            ours.raw,
        )
        b = (
            theirs.status,
            theirs.process_id,
            theirs.deal_id,
            [
                {"errorCode": e.error_code, "fieldName": e.field_name, "message": e.message, "parts": (e.layer, e.component, e.number)}
                for e in theirs.errors
            ],
            theirs.raw,
        )
        if a != b:
            raise SystemExit(f"the two sides read {body!r} differently:\n{a}\n{b}")


def run(quick: bool = False) -> dict[str, float]:
    """For bench/run.py: both rates and their ratio, measured in this one run."""
    bodies = make_bodies(300 if quick else 1000)
    check_same_results(bodies)
    seconds, repeats = (0.5, 2) if quick else (2.0, 5)
    rust, python = [], []
    for _ in range(repeats):
        rust.append(rate(fxpay.parse_deal_created, bodies, seconds))
        python.append(rate(py_parse_deal_created, bodies, seconds))
    r, p = max(rust), max(python)
    return {"fxpay_per_s": r, "python_per_s": p, "ratio": r / p}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    ap.add_argument("--repeats", type=int, default=5, help="best of this many")
    ap.add_argument("--bodies", type=int, default=1000)
    args = ap.parse_args()
    bodies = make_bodies(args.bodies)
    check_same_results(bodies)
    rust, rust_raw, python = [], [], []
    for _ in range(args.repeats):  # interleaved, so drift hits every side alike
        rust.append(rate(fxpay.parse_deal_created, bodies, args.seconds))
        rust_raw.append(rate(parse_and_read_raw, bodies, args.seconds))
        python.append(rate(py_parse_deal_created, bodies, args.seconds))
    r, rr, p = max(rust), max(rust_raw), max(python)
    size = sum(len(b) for b, _ in bodies) / len(bodies)
    print(f"python {sys.version.split()[0]}, fxpay {fxpay.__version__}, {len(bodies)} mixed bodies (mean {size:.0f} bytes)")
    print(f"fxpay.parse_deal_created : {r:12,.0f} events/s  ({1e6 / r:.2f} us/event)")
    print(f"  ... and reading .raw   : {rr:12,.0f} events/s  ({1e6 / rr:.2f} us/event)")
    print(f"pure-Python baseline     : {p:12,.0f} events/s  ({1e6 / p:.2f} us/event)")
    print(f"ratio                    : {r / p:.2f}x  ({rr / p:.2f}x when .raw is read)")


if __name__ == "__main__":
    main()
