"""The journal in a SQLAlchemy application's PostgreSQL: ``PostgresJournal(engine.raw_connection)``,
as docs/deployment.md's FastAPI recipe has it."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest

import fxpay

from conftest import make_beneficiary, need
from journal_support import deal_args, read_until, requests_to
from postgres_support import PostgresServer, postgres_server, table_name

__all__ = ["postgres_server"]  # a fixture, imported for the tests below

DEALS = "POST /v1/payments/deals"


@pytest.fixture
def engine(postgres_server: PostgresServer) -> Any:
    sqlalchemy = need("sqlalchemy")
    engine = sqlalchemy.create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{postgres_server.port}/postgres")
    yield engine
    engine.dispose()


def test_a_claim_is_committed_whatever_the_session_around_the_call_does(fxpay_sandbox: Any, engine: Any) -> None:
    sqlalchemy = need("sqlalchemy")
    from sqlalchemy.orm import Session

    journal = fxpay.PostgresJournal(engine.raw_connection, table=table_name())
    journal.create_table()
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        with Session(engine) as session:
            session.execute(sqlalchemy.text("CREATE TEMP TABLE orders (id int)"))
            session.execute(sqlalchemy.text("INSERT INTO orders VALUES (1)"))
            deal = c.create_deal(**args, idempotency_key="in-session")
            # Another session of the engine sees the key (its claim, within moments its
            # result) while this one's transaction is open.
            with engine.connect() as other:

                def state() -> Any:
                    return other.execute(
                        sqlalchemy.text(f'SELECT state FROM "{journal.table}" WHERE key = :k'), {"k": "in-session"}
                    ).scalar_one()

                read_until(state, "done", meanwhile="pending")
            session.rollback()
        assert journal.get("in-session").result == deal.deal_id  # type: ignore[union-attr]
        assert c.create_deal(**args, idempotency_key="in-session") == deal
        assert requests_to(fxpay_sandbox, DEALS) == 1
    # The journal holds one connection of the pool for itself.
    assert engine.pool.checkedout() == 1
    journal.close()
    assert engine.pool.checkedout() == 0


def test_the_fastapi_recipe_pays_an_invoice_once(fxpay_sandbox: Any, engine: Any) -> None:
    need("fastapi")
    need("httpx")
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from sqlalchemy.orm import Session

    journal = fxpay.PostgresJournal(engine.raw_connection, table=table_name())
    journal.create_table()
    client = fxpay_sandbox.client(journal=journal)
    bid = client.create_beneficiary(make_beneficiary())
    app = FastAPI()

    @app.post("/invoices/{invoice_id}/pay")
    async def pay(invoice_id: str, amount: Decimal) -> dict[str, str]:
        with Session(engine) as session, session.begin():
            qid = await client.create_quote_async(
                buy_currency="USD", buy_amount=amount, sell_currency="AUD", idempotency_key=f"invoice:{invoice_id}:quote"
            )
            quote = await client.get_quote_async(qid)
            deal = await client.create_deal_async(
                quote_id=qid,
                funding_source="Own account",
                beneficiaries=[fxpay.DealBeneficiary(bid, quote.sell_amount, "invoice", invoice_id)],
                idempotency_key=f"invoice:{invoice_id}:deal",
            )
        return {"deal_id": deal.deal_id}

    with TestClient(app) as http:
        first = http.post("/invoices/INV-7/pay", params={"amount": "25"})
        again = http.post("/invoices/INV-7/pay", params={"amount": "25"})
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert [d["dealId"] for d in fxpay_sandbox.deals()] == [first.json()["deal_id"]]
    client.close()


def test_a_connection_whose_statement_failed_is_invalidated_in_the_engines_pool(postgres_server: PostgresServer) -> None:
    """A statement that fails on a connection of a SQLAlchemy engine's pool: the journal
    invalidates that connection (its session ends), so that the pool never hands it out
    again; given back as it is, the pool would keep the session (and whatever it left)."""
    sqlalchemy = need("sqlalchemy")
    name = table_name()
    engine = sqlalchemy.create_engine(
        f"postgresql+psycopg://postgres@127.0.0.1:{postgres_server.port}/postgres", connect_args={"application_name": name}
    )
    admin_engine = sqlalchemy.create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{postgres_server.port}/postgres")
    journal = fxpay.PostgresJournal(engine.raw_connection, table=name, timeout=30.0)
    try:
        journal.create_table()

        def pids() -> set[int]:
            with admin_engine.connect() as admin:
                rows = admin.execute(sqlalchemy.text("SELECT pid FROM pg_stat_activity WHERE application_name = :n"), {"n": name})
                return {int(r[0]) for r in rows}

        used = pids()
        assert len(used) == 1, used
        with pytest.raises(fxpay.JournalError, match=r"^PostgresJournal\.probe\(\) failed: DivisionByZero: division by zero"):
            journal._run("probe", ("SELECT 1/0", ()))
        assert engine.pool.checkedout() == 0, "the failed connection is still checked out of the engine's pool"
        deadline = time.monotonic() + 10
        while used & pids():
            assert time.monotonic() < deadline, "the failed connection went back to the pool with its session"
            time.sleep(0.02)
        with engine.connect() as again:  # the pool makes a new session
            pid = again.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar_one()
            assert pid not in used
    finally:
        journal.close()
        engine.dispose()
        admin_engine.dispose()
