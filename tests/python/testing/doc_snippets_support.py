"""Runs the python blocks of one Markdown page, in order, in one namespace (as a reader who
pastes them one after another would), in this process: ``python doc_snippets_support.py PAGE``.

Before the first block, an embedded sandbox is started and ``FXPAY_BASE_URL``,
``FXPAY_CLIENT_ID``, ``FXPAY_CLIENT_SECRET`` and ``FXPAY_ADMIN_TOKEN`` point at it, as they
would at the service (or at ``python -m fxpay.sandbox``) for a reader. A block may use
``await`` at its top level (it runs in an event loop, as in ``python -m asyncio``). Prints
``ok <line>`` per block; the first block that raises ends the run with its traceback.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import sys
from pathlib import Path

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(page: Path) -> list[tuple[int, str]]:
    text = page.read_text()
    return [(text[: m.start()].count("\n") + 2, m.group(1)) for m in BLOCK.finditer(text)]


def main(page: Path) -> None:
    # The reader's own modules that blocks import (app.fx, orders.models, myapp): stand-ins.
    sys.path.insert(0, str(Path(__file__).parent / "doc_context"))
    import fxpay.testing

    sb = fxpay.testing.Sandbox()
    os.environ.update(
        FXPAY_BASE_URL=sb.base_url,
        FXPAY_CLIENT_ID=sb.client_id,
        FXPAY_CLIENT_SECRET=sb.client_secret,
        FXPAY_ADMIN_TOKEN=sb.admin_token,
    )
    namespace: dict[str, object] = {"__name__": "__doc_snippet__"}
    for line, code in blocks(page):
        compiled = compile(code, f"{page}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        result = eval(compiled, namespace)  # the docs own code, run on purpose
        if inspect.isawaitable(result):
            asyncio.run(_wait(result))
        print(f"ok {line}", flush=True)


async def _wait(awaitable: object) -> None:
    await awaitable  # type: ignore[misc]


if __name__ == "__main__":
    main(Path(sys.argv[1]))
