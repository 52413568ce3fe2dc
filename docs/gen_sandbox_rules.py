"""Generates the docs' "Sandbox rules" page from the sandbox's own ``/openapi.json``.

The page lists every choice the service's specification leaves open ("not shown") and the
sandbox had to make: each endpoint's statuses and error codes, the error-code table, bounds,
lifetimes, the DealCreated retry policy, virtual-account fields, PKCE, the body timeout and
the admin API. It is rendered from the document an embedded ``fxpay.testing.Sandbox`` serves,
so it cannot drift from the sandbox; Rust tests (``crates/fxpay-sandbox/src/http/openapi.rs``) check that
document against ``errors.rs`` and the sandbox's constants.

Used two ways:

- as an mkdocs hook (``hooks:`` in mkdocs.yml): ``on_files`` adds ``sandbox-rules.md``;
- as a script: ``python docs/gen_sandbox_rules.py`` prints the page.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from decimal import Decimal
from typing import Any

PAGE = "sandbox-rules.md"
METHODS = ("get", "post", "put", "patch", "delete")


def served_document() -> dict[str, Any]:
    """The document a fresh embedded sandbox serves at ``/openapi.json``."""
    from fxpay.testing import Sandbox

    with Sandbox() as sb, urllib.request.urlopen(sb.base_url + "/openapi.json", timeout=10) as resp:
        # Numbers as written (Decimal): an amount or a rate never passes through float.
        doc: dict[str, Any] = json.load(resp, parse_float=Decimal)
    return doc


def text(value: object) -> str:
    """Markdown for prose from the document: ``<`` and ``>`` outside code spans escaped."""
    parts = str(value).split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def cell(value: object) -> str:
    """``text`` made safe for one table cell."""
    return text(value).replace("|", "\\|").replace("\n", " ")


def code(value: object) -> str:
    return f"`{value}`"


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def render(doc: dict[str, Any]) -> str:
    out: list[str] = []
    add = out.append
    add("# Sandbox rules\n")
    add(
        'Where the service\'s specification says "not shown" (a status, an error code, a '
        "bound, a lifetime, a retry policy), the sandbox had to choose. Every such choice is "
        "on this page. The page is generated, at each docs build, from the OpenAPI document "
        "the sandbox itself serves at `/openapi.json` (any running sandbox answers it: "
        '`sb.base_url + "/openapi.json"`), so the two cannot differ. The real service may '
        "choose otherwise: code against the documented error classes of fxpay, and use these "
        "details to write tests.\n"
    )
    add(f"Document version: {code(doc.get('info', {}).get('version', '?'))}, OpenAPI {code(doc.get('openapi', '?'))}.\n")
    add("## General\n")
    add(text(doc.get("info", {}).get("description", "")) + "\n")

    for topic in doc.get("x-fxpay-rules", []):
        add(f"## {topic['topic']}\n")
        for rule in topic.get("rules", []):
            line = f"- {text(rule['rule'])}"
            if "key" in rule:
                value = rule["value"]
                shown = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
                unit = f" {rule['unit']}" if "unit" in rule else ""
                line += f" (`{rule['key']}` = {shown}{unit})"
            add(line)
        add("")

    table = doc.get("x-fxpay-error-codes", {})
    add("## Error codes\n")
    add(text(table.get("description", "")) + "\n")
    fv = table.get("fieldValidation", {})
    if fv:
        comps = ", ".join(code(c) for c in fv.get("components", []))
        add("### Field validation\n")
        add(f"Code {code(fv.get('pattern'))}, status {fv.get('status')}; the component is one of {comps}.\n")
        add("| number | meaning |\n|---:|---|")
        for row in fv.get("numbers", []):
            add(f"| {row['number']} | {cell(row['meaning'])} |")
        add("")
    add("### Every other code\n")
    add("| code | status | meaning |\n|---|---|---|")
    for row in table.get("codes", []):
        status = row["status"]
        status = "chosen by `fail_next`" if status == "chosen" else status
        add(f"| {code(row['code'])} | {status} | {cell(row['meaning'])} |")
    add("")

    schemas = doc.get("components", {}).get("schemas", {})
    supported = schemas.get("SupportedCurrency", {}).get("enum", [])
    if supported:
        steps = {}
        for branch in schemas.get("QuoteRequest", {}).get("anyOf", []):
            props = branch.get("properties", {})
            steps[props.get("buyCurrency", {}).get("const")] = props.get("buyAmount", {}).get("multipleOf")
        rates = {r["currency"]: r for r in doc.get("x-fxpay-rates", [])}
        add("## Currencies with a rate\n")
        add(
            "A quote's currencies must be among these (another ISO 4217 code is "
            "`validation:quote:1006`); a quote's `buyAmount` steps by the buy currency's minor "
            "unit. The value in US dollars and the flat fee price quotes (see Pricing of quotes).\n"
        )
        add("| currency | amount step | value in USD | flat fee |\n|---|---:|---:|---:|")
        for c in supported:
            r = rates.get(c, {})
            add(f"| {c} | {steps.get(c, '')} | {r.get('usdValue', '')} | {r.get('flatFee', '')} |")
        add("")

    add("## Endpoints\n")
    add("Every status each endpoint answers, and why.\n")
    tags = {t["name"]: t.get("description") for t in doc.get("tags", [])}
    seen_tags: set[str] = set()
    for path, ops in doc.get("paths", {}).items():
        for method in METHODS:
            op = ops.get(method)
            if not isinstance(op, dict):
                continue
            for tag in op.get("tags", []):
                if tag not in seen_tags and tags.get(tag):
                    seen_tags.add(tag)
                    add(f'!!! note "{tag}"\n    {text(tags[tag])}\n')
            add(f"### `{method.upper()} {path}`\n")
            if op.get("summary"):
                add(text(op["summary"]) + ".\n")
            if op.get("description"):
                add(text(op["description"]) + "\n")
            add("| status | meaning |\n|---|---|")
            for status, resp in op.get("responses", {}).items():
                add(f"| {status} | {cell(resp.get('description', ''))} |")
            add("")
    return "\n".join(out)


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the generated page to the site."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render(served_document())))
    return files


if __name__ == "__main__":
    sys.stdout.write(render(served_document()))
