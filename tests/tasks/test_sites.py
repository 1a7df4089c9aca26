"""The generated world and the mini-wiki corpus as websites: pages, links, manifest, writing."""

import json
import re
from html import unescape
from html.parser import HTMLParser
from urllib.parse import unquote, urljoin

import pytest

from searchgym.errors import ConfigError
from searchgym.tasks import html_site
from searchgym.tasks.miniwiki_site import render_miniwiki_site, write_miniwiki_site
from searchgym.tasks.world import load_world
from searchgym.tasks.world.entities import RELATIONS
from searchgym.tasks.world.site import fact_label, fact_value, render_site, write_site


@pytest.fixture(scope="module")
def world():
    return load_world(seed=0, n_passages=300)


@pytest.fixture(scope="module")
def site(world):
    return render_site(world)


class Hrefs(HTMLParser):
    """The href of every link of a page."""

    def __init__(self, html):
        super().__init__()
        self.hrefs = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href"))


def infobox(html):
    """Label -> (text, href or None) of each infobox row."""
    rows = {}
    for label, cell in re.findall(r'<tr><th scope="row">(.*?)</th><td>(.*?)</td></tr>', html):
        link = re.fullmatch(r'<a href="(.*?)">(.*?)</a>', cell)
        rows[unescape(label)] = (unescape(link.group(2)), link.group(1)) if link else (unescape(cell), None)
    return rows


def test_every_entity_has_a_page_with_its_facts_and_links_to_their_pages(world, site):
    files, manifest = site
    by_id = {e["id"]: e for e in world.entities}
    path_of = {e["id"]: manifest["passages"][next(iter(e["passages"].values()))] for e in world.entities}
    assert len(manifest["pages"]) == len(world.entities) == len(set(manifest["pages"]))
    for e in world.entities:
        html = files[path_of[e["id"]]]
        rows = infobox(html)
        for (kind, name), relation in RELATIONS.items():
            if kind != e["kind"] or name not in e["facts"]:
                continue
            value = e["facts"][name]
            text, href = rows[fact_label(name)]
            if relation.target:  # the row links, relatively, to the target's page
                assert text == by_id[value]["name"]
                assert urljoin(path_of[e["id"]], href) == path_of[value]
            else:
                assert text == fact_value(name, value) and href is None
        for pid in e["passages"].values():  # every passage is on the page, whole
            passage = next(p for p in world.passages if p["id"] == pid)
            assert passage["text"] in unescape(re.sub(r"<[^>]+>", "", html))


def test_every_relative_link_resolves_to_a_file_or_is_meant_to_be_missing(site):
    files, _ = site
    missing = set()
    for path, html in files.items():
        if not path.endswith(".html"):
            continue
        for href in Hrefs(html).hrefs:
            if href and not re.match(r"^(javascript|mailto|https?):|^#", href):
                target = urljoin(path, href).split("?")[0]
                if target not in files:
                    missing.add(target.split("/")[0])
    assert missing == {"edit"}  # "[edit]" links lead nowhere, as on a read-only mirror


def test_pages_carry_the_clutter_of_real_pages(site):
    files, _ = site
    html = files["wiki/Salian_Vendell.html"]
    for clutter in (
        "<script>",
        "<style>",
        "<nav",
        "<footer",
        "<aside",
        "cookie-banner",
        "javascript:",
        "mailto:",
    ):
        assert clutter in html
    assert "[<a href=" in html and ">edit</a>]" in html
    assert '<meta name="robots" content="noindex">' in files["index.html"]
    assert '<meta name="robots" content="noindex">' in files["category/person.html"]
    assert "noindex" not in html


def test_names_are_escaped():
    assert (
        html_site.linked_text("<b>&", [(0, 3, "x.html?a=1&b=2")])
        == '<a href="x.html?a=1&amp;b=2">&lt;b&gt;</a>&amp;'
    )
    page = html_site.render_page(site="S", title="A <script> & B", content="", depth=1, nav=[])
    assert "<title>A &lt;script&gt; &amp; B – S</title>" in page and "A <script>" not in page


def test_write_is_atomic_idempotent_and_never_overwrites_another_site(world, tmp_path):
    out = write_site(world, tmp_path / "site")
    manifest = json.loads((out / "site.json").read_text())
    assert (out / "wiki" / "Salian_Vendell.html").is_file() and manifest["title"] == "Fictopedia"
    stamp = (out / "site.json").stat().st_mtime_ns
    assert write_site(world, out) == out and (out / "site.json").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == ["site"]  # no temporary folder left behind
    with pytest.raises(ConfigError, match="holds another site"):
        write_site(load_world(seed=1, n_passages=300), out)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not a site folder"):
        write_site(world, tmp_path / "other")


def test_slugs_are_unique_file_names():
    titles = ["A/B", "a/b", "Dune (novel)", "Ça va", "..", "x" * 300, "?#%"]
    slugs = html_site.slugs(titles)
    assert len({s.lower() for s in slugs}) == len(titles)
    assert all("/" not in s and not s.startswith(".") and len(s) <= 130 for s in slugs)
    assert html_site.article_path("Dune_(novel)") == "wiki/Dune_%28novel%29.html"


def test_miniwiki_pages_link_titles_found_in_other_articles(tmp_path):
    rows = [
        ("m1", "Orvo", "Orvo is a port on the Kell Sea. It trades with Brask and Orvo Bay."),
        ("m2", "Kell Sea", "The Kell Sea lies north of Orvo."),
        ("m3", "Brask (city)", "Brask is a city. Not Braskish."),
        ("m4", "Mercury (planet)", "Mercury is a planet."),
        ("m5", "Mercury (element)", "Mercury is an element, named like the planet."),
        ("m6", "Zed", "Zed mentions Mercury, Kell Sea and Kell Sea again."),
    ]
    files, manifest = render_miniwiki_site(rows, {"kind": "test"})
    orvo = files["wiki/Orvo.html"]
    assert (
        '<a href="Kell_Sea.html">Kell Sea</a>' in orvo and '<a href="Brask_%28city%29.html">Brask</a>' in orvo
    )
    assert 'href="Orvo.html"' not in orvo  # no link to itself
    zed = files["wiki/Zed.html"]
    assert "Mercury.html" not in zed and "Mercury_" not in zed  # ambiguous base title: no link
    assert zed.count('href="Kell_Sea.html"') == 1  # first mention only
    assert manifest["passages"]["m3"] == "wiki/Brask_%28city%29.html"
    out = write_miniwiki_site_from_rows(rows, tmp_path)
    assert (out / unquote("wiki/Brask_%28city%29.html")).is_file()


def write_miniwiki_site_from_rows(rows, tmp_path):
    corpus = tmp_path / "miniwiki.jsonl"
    corpus.write_text("".join(json.dumps(dict(zip(("id", "title", "text"), r))) + "\n" for r in rows))
    return write_miniwiki_site(corpus, tmp_path / "site")
