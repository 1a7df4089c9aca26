"""The viewer's one HTML page: served with its scripts as files, or exported as a single file
with the scripts, the style sheet and the data inline."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from searchgym.errors import ConfigError

STYLES = ("app.css",)
SCRIPTS = ("util.js", "data.js", "charts.js", "list.js", "episode.js", "compare.js", "training.js", "main.js")
"""In load order: each may use what the ones before it define."""
_TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>searchgym viewer</title>
<link rel="icon" href="data:,">
{head}
</head>
<body>
<header class="top"><a class="brand" href="#/episodes">searchgym <span>viewer</span></a><nav id="nav"></nav>
<span id="where" class="where"></span></header>
<main id="app"><p class="muted">Loading…</p></main>
{body}
</body>
</html>
"""


def static_text(name: str) -> str:
    """A file of the page shipped in ``searchgym/viewer/static``."""
    return (files("searchgym.viewer") / "static" / name).read_text(encoding="utf-8")


def render_page(*, inline: bool, data: dict[str, Any] | None = None) -> str:
    """The page: linking ``static/…`` files, or (``inline``) holding them and ``data``, which
    the scripts read instead of calling the API."""
    if not inline:
        head = "\n".join(f'<link rel="stylesheet" href="static/{n}">' for n in STYLES)
        body = "\n".join(f'<script src="static/{n}"></script>' for n in SCRIPTS)
        return _TEMPLATE.format(head=head, body=body)
    head = "\n".join(f"<style>\n{static_text(n)}\n</style>" for n in STYLES)
    parts = [f'<script type="application/json" id="sg-data">{embed_json(data or {})}</script>']
    for name in SCRIPTS:
        code = static_text(name)
        if "</script" in code.lower():
            raise ConfigError(f"static/{name} contains '</script', which would end its inline <script>")
        parts.append(f"<script>\n{code}\n</script>")
    return _TEMPLATE.format(head=head, body="\n".join(parts))


def embed_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element: ``<``, ``>`` and ``&`` are
    written as \\u escapes, so no text in it can close the element.

    >>> embed_json({"doc": "</script><script>alert(1)</script>"})
    '{"doc": "\\\\u003c/script\\\\u003e\\\\u003cscript\\\\u003ealert(1)\\\\u003c/script\\\\u003e"}'
    """
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escape)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
