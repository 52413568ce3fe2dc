"""mkdocs hook: renders the Sphinx roles of fxpay's docstrings (``:class:`X```) as code.

mkdocstrings renders docstrings as Markdown, where ``:class:`X``` becomes the text
``:class:`` followed by the code span ``X``; this hook drops the role prefix.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:class|func|meth|attr|exc|mod|data|obj):(?=<code>)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return ROLE.sub("", html)
