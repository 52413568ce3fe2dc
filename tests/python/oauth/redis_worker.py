"""A worker process for the Redis token-store tests (run as a script, prints JSON)."""

from __future__ import annotations

import json
import sys
import threading
import time

import fxpay


def main() -> None:
    cfg = json.loads(sys.argv[1])
    store = fxpay.RedisTokenStore(url=cfg["redis_url"], prefix=cfg["prefix"])
    client = fxpay.Client(cfg["client_id"], cfg["client_secret"], base_url=cfg["base_url"], token_store=store)
    # Start together, to race for the token.
    time.sleep(max(0.0, cfg["start_at"] - time.time()))
    errors: list[str] = []
    done = 0
    lock = threading.Lock()

    def payments() -> None:
        nonlocal done
        for _ in range(cfg["calls"]):
            try:
                client.get_quote(cfg["quote_id"])
                with lock:
                    done += 1
            except fxpay.FxPayError as e:
                errors.append(f"{type(e).__name__}: {e}")

    def accounts() -> None:
        nonlocal done
        token = fxpay.Token.from_dict(cfg["user_token"])
        session = client.user_session(token, key=cfg["user_key"])
        try:
            session.list_virtual_accounts()
            with lock:
                done += 1
        except fxpay.FxPayError as e:
            errors.append(f"{type(e).__name__}: {e}")

    target = payments if cfg["mode"] == "payments" else accounts
    threads = [threading.Thread(target=target) for _ in range(cfg.get("threads", 4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"done": done, "errors": errors}))


if __name__ == "__main__":
    main()
