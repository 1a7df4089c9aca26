"""Offline websites: page chrome like real encyclopedia pages, link markup, and atomic writing.

The generated world (`searchgym.tasks.world.site`) and the mini-Wikipedia corpus
(`searchgym.tasks.miniwiki_site`) render as folders of static HTML: ``index.html``,
``wiki/<Slug>.html`` per article, ``category/<name>.html``, a stylesheet, and ``site.json``
(the manifest: what the site is, its pages, and the page path of each corpus passage, so that an
environment can report evidence recall). Every page carries the clutter of a real page — a
cookie banner, a header with a search form, navigation, a sidebar, a footer, inline and external
scripts, a stylesheet, ``javascript:`` and ``mailto:`` links, "edit" links — around a ``<main>``
element with the content. Index and category pages say ``<meta name="robots" content="noindex">``
so a site search leaves them out, as search engines do. Paths in the manifest are relative to
the site root and percent-encoded, ready to join to a base URL.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from searchgym.errors import ConfigError

MANIFEST = "site.json"
MAX_SLUG_CHARS = 120
STYLESHEET = """body{font-family:sans-serif;margin:0}main{max-width:60em;margin:auto}
.infobox{float:right;border:1px solid #aaa;margin:0 0 1em 1em}.cookie-banner{position:fixed;bottom:0}
.sidebar{float:left;width:10em}.mw-editsection{font-size:small}footer{clear:both;color:#555}
"""
_TRACKER = """window.dataLayer = window.dataLayer || [];
function track(e) { dataLayer.push({event: e, page: location.pathname}); }
document.addEventListener("DOMContentLoaded", function () { track("view"); });"""


def slugs(titles: Iterable[str]) -> list[str]:
    """A file-name-safe slug per title, unique even on case-insensitive file systems.

    >>> slugs(["Ada Quell", "AC/DC", "ada quell", ".hidden"])
    ['Ada_Quell', 'AC_DC', 'ada_quell_2', '_hidden']
    """
    seen: set[str] = set()
    out = []
    for title in titles:
        base = re.sub(r"[\s/\\:*?\"<>|#%&+;=]+", "_", title.strip())[:MAX_SLUG_CHARS]
        base = re.sub(r"^[._]+|\.+$", "_", base).strip() or "page"
        slug, n = base, 1
        while slug.lower() in seen:
            n += 1
            slug = f"{base}_{n}"
        seen.add(slug.lower())
        out.append(slug)
    return out


def article_path(slug: str) -> str:
    """The percent-encoded path of an article, relative to the site root."""
    return f"wiki/{quote(slug)}.html"


def linked_text(text: str, spans: Sequence[tuple[int, int, str]]) -> str:
    """``text`` as HTML with ``<a href>`` over the given ``(start, end, href)`` spans, which must
    not overlap; the rest is escaped.

    >>> linked_text("Born in Orvo & raised.", [(8, 12, "Orvo.html")])
    'Born in <a href="Orvo.html">Orvo</a> &amp; raised.'
    """
    out, at = [], 0
    for start, end, href in sorted(spans):
        out.append(escape(text[at:start]))
        out.append(f'<a href="{escape(href)}">{escape(text[start:end])}</a>')
        at = end
    out.append(escape(text[at:]))
    return "".join(out)


def render_page(
    *,
    site: str,
    title: str,
    content: str,
    depth: int,
    nav: Sequence[tuple[str, str]],
    categories: Sequence[tuple[str, str]] = (),
    noindex: bool = False,
) -> str:
    """A full HTML page around ``content`` (HTML for inside ``<main>``, after the ``<h1>``).
    ``depth`` is how many folders below the root the page is, for relative links; ``nav`` and
    ``categories`` are ``(label, root-relative path)`` pairs."""
    up = "../" * depth
    h = escape
    robots = '\n<meta name="robots" content="noindex">' if noindex else ""
    nav_items = "".join(f'<li><a href="{up}{h(p)}">{h(label)}</a></li>' for label, p in nav)
    cats = " · ".join(f'<a href="{up}{h(p)}">{h(label)}</a>' for label, p in categories)
    catlinks = f'\n<div class="catlinks">Categories: {cats}</div>' if cats else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">{robots}
<title>{h(title)} – {h(site)}</title>
<link rel="stylesheet" href="{up}static/site.css">
<style>.skip-link{{position:absolute;left:-999px}} .infobox th{{text-align:left}}</style>
<script>{_TRACKER}</script>
<script async src="{up}static/analytics.js"></script>
</head>
<body>
<a class="skip-link" href="#content">Jump to content</a>
<div id="cookie-banner" class="cookie-banner" role="dialog">This site uses cookies to improve your
experience. <a href="javascript:void(0)" onclick="this.parentNode.remove()">Accept all</a>
<a href="{up}privacy.html">Privacy policy</a></div>
<header class="site-header"><a class="logo" href="{up}index.html">{h(site)}</a>
<form class="search" action="{up}search.html" method="get"><input name="q" placeholder="Search {h(site)}">
<button type="submit">Search</button></form></header>
<nav class="main-nav" aria-label="Main menu"><ul>{nav_items}
<li><a href="javascript:randomPage()">Random article</a></li></ul></nav>
<aside class="sidebar"><h3>Tools</h3><ul><li><a href="{up}index.html">What links here</a></li>
<li><a href="javascript:window.print()">Printable version</a></li>
<li><a href="{up}about.html">Cite this page</a></li></ul></aside>
<main id="content">
<h1 id="firstHeading">{h(title)}</h1>
<div class="subtitle">From {h(site)}, the free encyclopedia</div>
{content}{catlinks}
</main>
<footer class="site-footer"><p>Text is available under a free licence; additional terms may apply.</p>
<ul><li><a href="{up}about.html">About {h(site)}</a></li><li><a href="{up}privacy.html">Privacy</a></li>
<li><a href="mailto:editors@example.org">Contact</a></li></ul></footer>
<noscript><img src="{up}static/pixel.gif" alt=""></noscript>
<script>document.querySelectorAll("a").forEach(function (a) {{ a.dataset.seen = "1"; }});</script>
</body>
</html>
"""


def section_heading(title: str, number: int, edit_path: str, depth: int) -> str:
    """An ``<h2>`` with a MediaWiki-style "[edit]" link (to a page that does not exist)."""
    anchor = escape(re.sub(r"\s+", "_", title))
    edit = f"{'../' * depth}{escape(edit_path)}?section={number}"
    return (
        f'<h2 id="{anchor}">{escape(title)}<span class="mw-editsection">[<a href="{edit}" '
        f'rel="nofollow">edit</a>]</span></h2>'
    )


def list_page_content(links: Sequence[tuple[str, str]], depth: int, intro: str = "") -> str:
    """A ``<p>`` intro and a ``<ul>`` of ``(label, root-relative path)`` links."""
    up = "../" * depth
    items = "\n".join(f'<li><a href="{up}{escape(p)}">{escape(label)}</a></li>' for label, p in links)
    return (f"<p>{escape(intro)}</p>\n" if intro else "") + f"<ul>\n{items}\n</ul>"


def standard_pages(site: str, nav: Sequence[tuple[str, str]], about: str) -> dict[str, str]:
    """The stylesheet, scripts and the about and privacy pages every site has."""
    privacy = "We store a cookie to remember that you accepted cookies. We do not sell your data."
    return {
        "static/site.css": STYLESHEET,
        "static/analytics.js": _TRACKER + "\n",
        "about.html": render_page(
            site=site, title=f"About {site}", content=f"<p>{escape(about)}</p>", depth=0, nav=nav
        ),
        "privacy.html": render_page(
            site=site, title="Privacy policy", content=f"<p>{privacy}</p>", depth=0, nav=nav, noindex=True
        ),
    }


def write_site(files: Mapping[str, str], manifest: Mapping[str, Any], out_dir: str | os.PathLike) -> Path:
    """Write ``files`` (root-relative, percent-encoded URL path -> text, UTF-8) and
    ``manifest`` as `MANIFEST` into ``out_dir`` atomically: the folder appears complete or not
    at all. A folder already holding the same site (equal ``manifest["source"]``) is kept as it
    is; one holding anything else is a `ConfigError`."""
    out = Path(out_dir).expanduser()
    if holds_site(out, manifest["source"]):
        return out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} exists and is not a site folder; pass an empty or new folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        for rel, text in files.items():
            path = work / unquote(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
        (work / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", "utf-8")
        if out.is_dir():
            out.rmdir()  # empty, checked above
        try:
            os.rename(work, out)
        except OSError:
            if not (out / MANIFEST).is_file():  # else another process wrote it first
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def holds_site(site_dir: str | os.PathLike, source: Mapping[str, Any]) -> bool:
    """Whether ``site_dir`` holds the site made from ``source``; a folder holding another site
    is a `ConfigError` (a site is never overwritten)."""
    path = Path(site_dir).expanduser() / MANIFEST
    if not path.is_file():
        return False
    existing = json.loads(path.read_text(encoding="utf-8")).get("source")
    if existing != source:
        raise ConfigError(f"{site_dir} holds another site ({existing}); pass an empty or new folder")
    return True


def read_manifest(site_dir: str | os.PathLike) -> dict[str, Any]:
    """The `MANIFEST` of a written site: ``source``, ``title``, ``pages`` (root-relative paths of
    the articles) and ``passages`` (passage id -> root-relative page path)."""
    path = Path(site_dir) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{site_dir} is not a written site: it has no {MANIFEST}")
    return json.loads(path.read_text(encoding="utf-8"))


class MentionFinder:
    """Whole-word, case-sensitive occurrences of known names (name -> target) in text; at
    each place the longest name wins and mentions do not overlap.

    >>> MentionFinder({"Orvo": "c1", "Orvo Bay": "c2"}).find("From Orvo Bay to Orvo.")
    [(5, 13, 'c2'), (17, 21, 'c1')]
    """

    def __init__(self, names: Mapping[str, str]) -> None:
        self._by_first: dict[str, list[tuple[str, str]]] = {}
        for name, target in sorted(names.items(), key=lambda kv: -len(kv[0])):
            first = re.match(r"\w+", name)
            if first:
                self._by_first.setdefault(first.group(0), []).append((name, target))

    def find(self, text: str) -> list[tuple[int, int, str]]:
        found, after = [], 0
        for m in re.finditer(r"\w+", text):
            if m.start() < after:
                continue
            for name, target in self._by_first.get(m.group(0), ()):
                end = m.start() + len(name)
                if text.startswith(name, m.start()) and not (end < len(text) and text[end].isalnum()):
                    found.append((m.start(), end, target))
                    after = end
                    break
        return found
