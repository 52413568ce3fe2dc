"""A chaos client: a process that makes keyed payments and may be SIGKILLed at any moment.

argv[1] is a JSON file: the sandbox (through the proxy), the stores, the receiver's URL, the
beneficiary, the batch's tasks (each a key, its store, its kind and attempt) and the history file.
Every call appends an ``invoke`` line before it starts and a ``complete`` line when it ends, each
flushed at once (Jepsen's history: a call with no ``complete`` was cut short).

Kinds: ``deal`` (create_quote, get_quote, create_deal, each keyed), ``spot`` (a keyed quote,
then a keyed create_spot_deal with a callback URL to the receiver) and ``payout`` (the batch's
rows through ``pay_out_iter``).

``plant`` (tests of the checker itself): ``no-journal`` sends every call unkeyed (a worker that
ignores its journal); ``resend-unknown`` resolves an unknown key as "not created" and sends again;
``recreate`` answers a refusing store by making a journal anew (``create()``) and going on."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from decimal import Decimal
from pathlib import Path
from typing import Any

import fxpay

FUNDING = "Own account"


def open_journal(store: str, stores: dict[str, Any]) -> fxpay.Journal:
    if store == "redis":
        return fxpay.RedisJournal(stores["redis_url"], prefix=stores["redis_prefix"])
    if store == "postgres":
        return fxpay.PostgresJournal(stores["pg_conninfo"], table=stores["pg_table"])
    return fxpay.SqliteJournal(stores["sqlite_path"])


def create_journal(journal: Any) -> None:
    """The one explicit step that makes a shared journal (turn 5), or its older name."""
    create = getattr(journal, "create", None) or getattr(journal, "create_table", None)
    if create is not None:
        create()


class History:
    def __init__(self, path: str) -> None:
        self.f = open(path, "a", buffering=1)  # noqa: SIM115 - kept open for the process's life, line-buffered

    def write(self, **fields: Any) -> None:
        fields["t"] = time.time()
        fields["pid"] = os.getpid()
        self.f.write(json.dumps(fields) + "\n")
        self.f.flush()


def outcome_of(e: BaseException) -> tuple[str, str]:
    """The history's outcome for an exception, and its text (with an unknown's cause)."""
    text = str(e)
    if isinstance(e, fxpay.OutcomeUnknownError):
        entry = getattr(e, "entry", None)
        cause = getattr(entry, "error", None) if entry is not None else None
        return "unknown", f"{text} | cause: {cause}" if cause and cause not in text else text
    if isinstance(e, fxpay.JournalError):
        return "journal-error", text
    if isinstance(e, fxpay.InProgressError):
        return "in-progress", text
    if isinstance(e, fxpay.KeyReusedError):
        return "key-reused", text
    if isinstance(e, fxpay.ApiError):
        codes = ",".join(err.error_code for err in getattr(e, "errors", []) or [])
        return "refused", f"{getattr(e, 'status', '')} {codes} {text}"
    if isinstance(e, fxpay.FxPayError):
        return "error", text
    return "crash", "".join(traceback.format_exception_only(type(e), e)).strip()


def main() -> None:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    hist = History(cfg["history"])
    plant = cfg.get("plant")
    stores = cfg["stores"]
    clients: dict[str, fxpay.Client] = {}
    journals: dict[str, Any] = {}

    def client(store: str) -> fxpay.Client:
        if store not in clients:
            journal = open_journal(store, stores)
            journals[store] = journal
            clients[store] = fxpay.Client(
                cfg["client_id"], cfg["client_secret"], base_url=cfg["base_url"], journal=journal, timeout=cfg["timeout"]
            )
        return clients[store]

    def keyed(key: str) -> dict[str, Any]:
        return {} if plant == "no-journal" else {"idempotency_key": key}

    def prior(store: str, key: str) -> str:
        try:
            e = journals[store].get(key)
        except fxpay.FxPayError:
            return "?"
        return e.state if e is not None else "absent"

    def deal(t: dict[str, Any]) -> dict[str, Any]:
        c = client(t["store"])
        key, ref = t["key"], t["ref"]
        before = prior(t["store"], f"{key}/deal")
        qid = c.create_quote(buy_currency="USD", buy_amount=Decimal(t["amount"]), sell_currency="AUD", **keyed(f"{key}/quote"))
        q = c.get_quote(qid)
        b = fxpay.DealBeneficiary(beneficiary_id=cfg["beneficiary_id"], amount=q.sell_amount, pay_reason="invoice", pay_reference=ref)
        d = c.create_deal(quote_id=qid, funding_source=FUNDING, beneficiaries=[b], **keyed(f"{key}/deal"))
        return {"outcome": "replayed" if before == "done" else "booked", "deal_id": d.deal_id, "quote_id": qid}

    def spot(t: dict[str, Any]) -> dict[str, Any]:
        c = client(t["store"])
        key, ref = t["key"], t["ref"]
        before = prior(t["store"], f"{key}/spot")
        qid = c.create_quote(buy_currency="USD", buy_amount=Decimal(t["amount"]), sell_currency="AUD", **keyed(f"{key}/quote"))
        q = c.get_quote(qid)
        b = fxpay.DealBeneficiary(beneficiary_id=cfg["beneficiary_id"], amount=q.sell_amount, pay_reason="invoice", pay_reference=ref)
        s = c.create_spot_deal(
            quote_id=qid,
            funding_source=FUNDING,
            beneficiaries=[b],
            callback_url=f"{cfg['receiver_url']}/hook/{t['store']}",
            **keyed(f"{key}/spot"),
        )
        return {
            "outcome": "replayed" if before == "done" else "booked",
            "process_id": s.process_id,
            "nonce": s.callback_nonce,
            "quote_id": qid,
        }

    def run_one(t: dict[str, Any]) -> None:
        hist.write(ev="invoke", key=t["key"], attempt=t["attempt"], store=t["store"], kind=t["kind"])
        for again in (True, True, False):
            try:
                done = deal(t) if t["kind"] == "deal" else spot(t)
                hist.write(ev="complete", key=t["key"], attempt=t["attempt"], **done)
                return
            except BaseException as e:
                outcome, text = outcome_of(e)
                if plant == "resend-unknown" and outcome == "unknown" and again:
                    journals[t["store"]].resolve(e.entry.key, result=None)  # type: ignore[attr-defined]  # the naive "fix": send again
                    continue
                if plant == "recreate" and outcome == "journal-error" and again:
                    create_journal(journals[t["store"]])  # the wrong answer to a refusing store
                    continue
                hist.write(
                    ev="complete", key=t["key"], attempt=t["attempt"], outcome=outcome, error_class=type(e).__name__, error=text[:500]
                )
                return

    tasks = cfg["tasks"]
    for t in tasks:
        if t["kind"] != "payout":
            run_one(t)
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for t in tasks:
        if t["kind"] == "payout":
            rows_of.setdefault(t["store"], []).append(t)
    for store, ts in rows_of.items():
        by_key = {t["key"]: t for t in ts}
        rows = [
            {
                "key": t["key"],
                "buy_currency": "USD",
                "buy_amount": Decimal(t["amount"]),
                "sell_currency": "AUD",
                "beneficiary_id": cfg["beneficiary_id"],
                "pay_reason": "invoice",
                "pay_reference": t["ref"],
            }
            for t in ts
        ]
        for t in ts:
            hist.write(ev="invoke", key=t["key"], attempt=t["attempt"], store=store, kind="payout")
        try:
            for r in client(store).pay_out_iter(rows, funding_source=FUNDING, concurrency=4):
                t = by_key[r["key"]]
                status = r["status"]
                outcome = {"booked": "booked", "replayed": "replayed", "unknown": "unknown"}.get(status, "refused")
                err = r.get("error") or ""
                if status == "refused" and ("journal" in err.lower()):
                    outcome = "journal-error"
                if status == "unknown" and "being sent by another call" in err:
                    outcome = "in-progress"  # a holder's lease (a killed worker's) not yet lapsed: nothing was sent
                if plant == "resend-unknown" and outcome == "unknown":
                    # The naive "fix": the row's unknown keys resolved as "not created", and the
                    # row left for a later worker, which sends it again.
                    for step in ("quote", "deal"):
                        e = journals[store].get(f"{t['key']}/{step}")
                        if e is not None and e.state == "unknown":
                            journals[store].resolve(e.key, result=None)
                    continue
                hist.write(
                    ev="complete",
                    key=t["key"],
                    attempt=t["attempt"],
                    outcome=outcome,
                    error_class=f"payout:{status}",
                    error=err[:500],
                    deal_id=r.get("deal_id"),
                    quote_id=r.get("quote_id"),
                )
        except BaseException as e:
            outcome, text = outcome_of(e)
            hist.write(ev="batch-error", store=store, outcome=outcome, error_class=type(e).__name__, error=text[:500])
    for c in clients.values():
        c.close()


if __name__ == "__main__":
    main()
