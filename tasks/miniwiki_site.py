"""The mini-Wikipedia corpus as a website: one page per lead paragraph, linked like Wikipedia.

A page shows its paragraph under the article title; wherever the title of another article
(without a trailing "(...)" disambiguation, and only when that base title names one article)
occurs in the text, the first occurrence links to that article, at most `MAX_LINKS` per page.
Pages are grouped into categories by their first letter. The chrome and the manifest are those
of `searchgym.tasks.html_site`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchgym.tasks import html_site
from searchgym.tasks.miniwiki import _read_rows, aliases

SITE_NAME = "Mini-Wikipedia"
SITE_FORMAT = 1  # bump when pages change, so cached sites are written again
MAX_LINKS = 20
MIN_LINK_CHARS = 4  # shorter titles ("Ra", "Oz") would link ordinary words
_NAV = (("Main page", "index.html"),)
ABOUT = f"{SITE_NAME} holds lead paragraphs of English Wikipedia articles, for offline search practice."


def render_miniwiki_site(
    rows: Sequence[tuple[str, str, str]], source: dict[str, Any]
) -> tuple[dict[str, str], dict[str, Any]]:
    """Every file of the site of ``rows`` (``(id, title, text)``) and its manifest, whose
    ``source`` is ``source``."""
    slug_list = html_site.slugs(title for _, title, _ in rows)
    bases: dict[str, list[int]] = {}
    for i, (_, title, _) in enumerate(rows):
        bases.setdefault(aliases(title)[-1], []).append(i)
    finder = html_site.MentionFinder(
        {base: str(ids[0]) for base, ids in bases.items() if len(ids) == 1 and len(base) >= MIN_LINK_CHARS}
    )
    files = html_site.standard_pages(SITE_NAME, _NAV, ABOUT)
    letters: dict[str, list[tuple[str, str]]] = {}
    for i, (_, title, text) in enumerate(rows):
        spans, seen = [], {i}
        for start, end, target in finder.find(text):
            j = int(target)
            if j not in seen and len(spans) < MAX_LINKS:
                seen.add(j)
                spans.append((start, end, f"{html_site.article_path(slug_list[j])[len('wiki/') :]}"))
        content = f"<p>{html_site.linked_text(text, spans)}</p>"
        letter = title[:1].upper() if title[:1].isalpha() else "0-9"
        category = (f"Articles: {letter}", f"category/{_letter_slug(letter)}.html")
        path = html_site.article_path(slug_list[i])
        files[path] = html_site.render_page(
            site=SITE_NAME, title=title, content=content, depth=1, nav=_NAV, categories=[category]
        )
        letters.setdefault(letter, []).append((title, path))
    for letter, links in sorted(letters.items()):
        files[f"category/{_letter_slug(letter)}.html"] = html_site.render_page(
            site=SITE_NAME,
            title=f"Articles: {letter}",
            content=html_site.list_page_content(links, 1, intro=f"{len(links)} articles."),
            depth=1,
            nav=_NAV,
            noindex=True,
        )
    index = [(f"Articles: {letter}", f"category/{_letter_slug(letter)}.html") for letter in sorted(letters)]
    files["index.html"] = html_site.render_page(
        site=SITE_NAME,
        title="Main page",
        content=html_site.list_page_content(index, 0, intro=ABOUT),
        depth=0,
        nav=_NAV,
        noindex=True,
    )
    manifest = {
        "source": source,
        "title": SITE_NAME,
        "pages": [html_site.article_path(s) for s in slug_list],
        "passages": {doc_id: html_site.article_path(s) for (doc_id, _, _), s in zip(rows, slug_list)},
    }
    return files, manifest


def write_miniwiki_site(corpus_path: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Write the site of the mini-Wikipedia corpus file ``corpus_path`` into ``out_dir``
    (atomically; a folder that already holds it is kept); return the folder."""
    source = miniwiki_site_source(corpus_path)
    if html_site.holds_site(out_dir, source):
        return Path(out_dir)
    files, manifest = render_miniwiki_site(_read_rows(Path(corpus_path)), source)
    return html_site.write_site(files, manifest, out_dir)


def miniwiki_site_source(corpus_path: str | os.PathLike) -> dict[str, Any]:
    """What a mini-wiki site is made from: the corpus file's SHA-256 and the page format."""
    digest = hashlib.sha256(Path(corpus_path).read_bytes()).hexdigest()
    return {"kind": "miniwiki", "corpus_sha256": digest, "format": SITE_FORMAT}


def _letter_slug(letter: str) -> str:
    return "digits" if letter == "0-9" else html_site.slugs([letter])[0]
