"""A process that pays out a table under a journal, for the chaos tests: it may be killed at
any moment. argv[1]: JSON with base_url, client_id, client_secret, journal ("sqlite:PATH",
"redis:URL|PREFIX" or "postgres:CONNINFO|TABLE"), rows, concurrency. Prints the status counts as JSON when it ends."""

from __future__ import annotations

import collections
import json
import signal
import sys
import time

import fxpay

# Ctrl-C raises KeyboardInterrupt here whatever this process inherited (a suite started as
# a background job ignores SIGINT, and so would its children).
signal.signal(signal.SIGINT, signal.default_int_handler)


def journal_of(spec: str) -> fxpay.Journal:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return fxpay.SqliteJournal(where)
    if kind == "postgres":
        conninfo, _, table = where.partition("|")
        return fxpay.PostgresJournal(conninfo, table=table)
    url, _, prefix = where.partition("|")
    return fxpay.RedisJournal(url, prefix=prefix)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    journal = journal_of(cfg["journal"])
    if "start_at" in cfg:
        time.sleep(max(0.0, cfg["start_at"] - time.time()))
    with fxpay.Client(cfg["client_id"], cfg["client_secret"], base_url=cfg["base_url"], journal=journal) as c:
        out = c.pay_out(cfg["rows"], funding_source="Own account", concurrency=cfg.get("concurrency", 8), progress=False)
    counts = collections.Counter(r["status"] for r in out)
    for r in out:
        if r["status"] == "refused":
            print(r["key"], r["error"], file=sys.stderr)
    print(json.dumps(dict(counts)), flush=True)


if __name__ == "__main__":
    main()
