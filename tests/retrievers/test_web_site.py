"""`FileSource` and `SiteSearch` over a small hand-written site."""

import os

import pytest

from searchgym.errors import ConfigError
from searchgym.retrievers.web import FetchError, PageSource, WebSearcher
from searchgym.retrievers.web.extract import extract
from searchgym.retrievers.web.site import FileSource, SiteSearch, snippet

BASE = "https://site.test/"
NOINDEX = '<meta name="robots" content="noindex">'


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    pages = {
        "index.html": f"<head>{NOINDEX}<title>Home</title></head><p>Orvo Kell Brask everywhere.</p>",
        "wiki/Orvo.html": "<title>Orvo</title><main><h1>Orvo</h1><p>Orvo is a port town. Its mayor is "
        "<a href='Ada_Quell.html'>Ada Quell</a>. The harbour freezes in winter.</p></main>",
        "wiki/Ada_Quell.html": "<title>Ada Quell</title><p>Ada Quell is a poet born in 1911 in Orvo.</p>",
        "wiki/Kell (sea).html": "<title>Kell</title><p>The Kell is a cold sea north of Brask.</p>",
        "notes.txt": "plain notes",
    }
    for rel, html in pages.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(html, encoding="utf-8")
    (tmp_path / "secret.html").write_text("<p>secret</p>")
    return root


def test_file_source_serves_pages_and_refuses_the_rest(site, tmp_path):
    source = FileSource(site, BASE)
    assert isinstance(source, PageSource)
    raw = source.get(BASE + "wiki/Orvo.html?x=1")
    assert raw.content_type == "text/html" and b"harbour" in raw.body
    assert source.get(BASE).body.startswith(b"<head>")  # a folder's index.html
    assert source.get(BASE + "wiki/Kell%20%28sea%29.html").url.endswith("%28sea%29.html")
    assert source.get(BASE + "notes.txt").content_type.startswith("text/plain")
    for url in (
        BASE + "wiki/Nope.html",
        BASE + "wiki/",
        BASE + "../secret.html",
        BASE + "%2e%2e/secret.html",
    ):
        with pytest.raises(FetchError, match="404 Not Found"):
            source.get(url)
    with pytest.raises(FetchError, match="not on this site"):
        source.get("https://elsewhere.test/wiki/Orvo.html")
    with pytest.raises(FetchError, match="not on this site"):
        source.get("http://site.test/wiki/Orvo.html")  # another scheme is another site
    os.symlink(tmp_path / "secret.html", site / "wiki" / "link.html")
    with pytest.raises(FetchError, match="404 Not Found"):
        source.get(BASE + "wiki/link.html")
    with pytest.raises(ConfigError, match="base_url must be an http"):
        FileSource(site, "file:///tmp/")


def test_links_on_served_pages_are_absolute_under_the_base(site):
    page = extract(FileSource(site, BASE).get(BASE + "wiki/Orvo.html"))
    assert [link.url for link in page.links] == [BASE + "wiki/Ada_Quell.html"]


def test_site_search_ranks_pages_with_snippets_and_skips_noindex(site):
    search = SiteSearch.from_dir(site, BASE)
    assert isinstance(search, WebSearcher)
    results = search.search("mayor of Orvo", k=5)
    assert [r.url for r in results] == [BASE + "wiki/Orvo.html", BASE + "wiki/Ada_Quell.html"]
    assert results[0].title == "Orvo" and results[0].snippet.startswith("Its mayor is Ada Quell.")
    assert "[1]" not in results[0].snippet  # link marks are not indexed text
    assert search.search("cold sea")[0].url == BASE + "wiki/Kell%20%28sea%29.html"
    assert search.search("everywhere") == []  # only the noindex page has it
    assert search.search("zzz") == []
    other = search.rebased("http://127.0.0.1:8000/")
    assert other.search("mayor of Orvo")[0].url == "http://127.0.0.1:8000/wiki/Orvo.html"
    assert search.search("mayor of Orvo")[0].url.startswith(BASE)


def test_site_search_keeps_extracted_pages_for_the_next_process(site):
    SiteSearch.from_dir(site, BASE)
    (cache,) = site.glob(".search-pages-*.jsonl")
    assert len(cache.read_text().splitlines()) == 3
    assert SiteSearch.from_dir(site, BASE).search("poet")[0].title == "Ada Quell"
    (site / "wiki" / "New.html").write_text("<title>New</title><p>A new poet page.</p>")
    assert {r.title for r in SiteSearch.from_dir(site, BASE).search("poet")} == {"Ada Quell", "New"}


def test_snippet_picks_the_best_sentence_and_stays_short():
    text = "# Orvo\nMayor | Ada\nOrvo is a town by the sea. Its mayor, Ada Quell, was elected in 1990."
    assert snippet(text, {"mayor"}) == "Its mayor, Ada Quell, was elected in 1990."
    long = "word " * 100
    assert len(snippet(long, {"word"})) <= 202 and snippet(long, {"word"}).endswith(" …")
    assert snippet("", {"x"}) == ""
