"""A client factory that Dask pickles to its worker processes (by reference: this module is
importable there, as it is on the test's sys.path): the sandbox's client with a RedisJournal
every worker shares."""

from __future__ import annotations

import fxpay


def make_client(base_url: str, client_id: str, client_secret: str, journal_url: str, prefix: str) -> fxpay.Client:
    return fxpay.Client(client_id, client_secret, base_url=base_url, journal=fxpay.RedisJournal(journal_url, prefix=prefix))
