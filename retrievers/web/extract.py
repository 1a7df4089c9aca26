"""HTML → `Page`: the text an agent reads, with numbered links, from any page the web serves.

Decoding follows what browsers do, made robust to wrong labels: a byte-order mark, then the
Content-Type charset, then ``<meta charset>`` (a label that fails to decode strictly is passed
over; a Western single-byte label on text that is valid non-ASCII UTF-8 reads as UTF-8), then
UTF-8, then for text dense in non-ASCII bytes the encoding `bs4.UnicodeDammit` detects, else
windows-1252 (HTML's default for unlabelled pages, and what "latin-1" means on the web).

Parsing is BeautifulSoup over lxml, fed a few KB at a time; elements nested deeper than
``MAX_DEPTH`` (512, where Chrome's parser stops nesting too) are closed between feeds, so what
follows them becomes their siblings, text and links kept. libxml2 looks through every open
element for each end tag that closes none of them, so without the cap a page of n open tags and
n stray end tags cost n² (32,000 of each: 5 s). The tree is walked with an explicit stack, never
by recursion. Time and memory are linear in the input, which is cut to ``max_bytes`` and
``max_tags`` start tags before parsing (the text then says so): the cost is per element, about
30 µs to parse and walk one on a laptop core, so the tag cap bounds a page at a few seconds
whatever its shape.

What is kept: the main content (``<main>``, ``role=main``, ``#content`` or a lone ``<article>``
when there is one, else the body) without scripts, styles, forms, navigation, sidebars,
footers, hidden elements and cookie banners or edit links (by class or id). Headings become
``## Heading`` lines, list items ``- item``, table rows ``cell | cell``, and every followable
link gets ``[n]`` after its text, where ``links[n - 1]`` is its absolute URL (joined against
``<base href>`` and the page URL; javascript:, mailto:, data: and fragment-only links are not
followable; a URL seen twice keeps its first number; past ``max_links`` links keep their text,
and a number only when the same href was numbered before).
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import re
from urllib.parse import urldefrag, urljoin, urlsplit

from bs4 import BeautifulSoup, NavigableString, Tag, UnicodeDammit
from bs4.builder import LXMLTreeBuilder
from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction

from searchgym.retrievers.web.page import FetchError, Link, Page, RawPage

DEFAULT_MAX_BYTES = 2_000_000
DEFAULT_MAX_LINKS = 1000
DEFAULT_MAX_TAGS = 100_000
MAX_DEPTH = 512
_FEED_CHARS = 4096  # between two looks at the depth, which can grow by a third of this
MAX_TITLE_CHARS = 300
MAX_LINK_TEXT_CHARS = 200
MAX_URL_CHARS = 2000
_SNIFF_BYTES = 4096
_DETECT_SAMPLE = 65536
_DENSE_NON_ASCII = 0.3  # share of non-ASCII bytes above which text is not Western single-byte

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain",)
_DROP = frozenset(
    "script style noscript template svg math iframe object embed canvas head form button input "  # noqa: SIM905
    "select textarea nav footer aside audio video map dialog".split()
)
_BLOCKS = frozenset(
    "p div section article main header address blockquote pre ul ol dl dt dd li table caption "  # noqa: SIM905
    "thead tbody tfoot tr figure figcaption hr details summary center fieldset".split()
)
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_CONTENT_IDS = frozenset({"content", "main-content", "mw-content-text", "bodyContent"})
_CLUTTER_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search", "dialog"})
_CLUTTER = re.compile(
    r"cookie|consent|gdpr|sidebar|navbox|navbar|breadcrumb|editsection|skip-?link|share-?bar|"
    r"social|advert|sponsor|newsletter|popup|modal",
    re.I,
)
_WESTERN = frozenset({"ascii", "latin_1", "iso8859_1", "cp1252", "iso8859_15"})
_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([\w.:-]+)", re.I)
_META_CHARSET = re.compile(rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([\w.:-]+)", re.I)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACE = re.compile(r"\s+")
_START_TAG = re.compile(rb"<[A-Za-z!?]")
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def extract(
    raw: RawPage,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_links: int = DEFAULT_MAX_LINKS,
    max_tags: int = DEFAULT_MAX_TAGS,
) -> Page:
    """The readable text, title and numbered links of ``raw`` (HTML or plain text).

    Other content types raise `FetchError`. A body over ``max_bytes``, or with more than
    ``max_tags`` start tags (parsing costs time and memory per element), is cut there and the
    text ends with a line saying how much was read; links past ``max_links`` keep their text
    but get no number.

    >>> page = extract(RawPage("https://x.test/a/", b"<title>T</title><p>See <a href='b'>B</a>.</p>"))
    >>> page.text, page.links
    ('See B [1].', (Link(text='B', url='https://x.test/a/b'),))
    """
    mime = raw.content_type.split(";", 1)[0].strip().lower()
    if mime and mime not in HTML_TYPES + TEXT_TYPES:
        raise FetchError(f"cannot read {raw.url}: its content type is {mime}, not HTML or text")
    body, note = raw.body, ""
    if len(body) > max_bytes:
        body = _cut(body, max_bytes)
    if mime not in TEXT_TYPES and body.count(b"<") - body.count(b"</") > max_tags:
        body = body[: _start_of_tag(body, max_tags + 1)]
    if len(body) < len(raw.body):
        note = f"[Only the first {len(body):,} bytes of this {len(raw.body):,}-byte page were read.]"
    text = _CONTROL.sub("", decode(body, raw.content_type))
    if mime in TEXT_TYPES:
        return Page(raw.url, _title_from_url(raw.url), _join([text.strip(), note]))
    soup = BeautifulSoup(text, builder=_DepthCapped())
    marks = _landmarks(soup)
    title = _tag_text(marks.get("title")) or _tag_text(marks.get("h1")) or _title_from_url(raw.url)
    base = raw.url
    if "base" in marks:
        with contextlib.suppress(ValueError):  # a malformed base is ignored, as browsers do
            base = urljoin(raw.url, str(marks["base"]["href"]).strip())
    whole = soup.body if isinstance(soup.body, Tag) else soup
    main = next((marks[k] for k in ("main", "role-main", "content-id", "article") if k in marks), whole)
    walker = _Walker(base, urldefrag(raw.url)[0], max_links)
    walker.walk(main)
    if main is not whole and not walker.lines:
        walker = _Walker(base, urldefrag(raw.url)[0], max_links)
        walker.walk(whole)
    return Page(raw.url, title, _join([walker.text(), note]), tuple(walker.links))


class _DepthCapped(LXMLTreeBuilder):
    """bs4's lxml builder, feeding lxml the page in pieces that end before a ``<`` and closing
    the elements past `MAX_DEPTH` between two pieces (see the module docstring)."""

    def feed(self, markup: str) -> None:
        self.parser = self.parser_for(self.soup.original_encoding)
        stack = self.soup.tagStack  # bs4's open elements, the root first: lxml's, as they stand
        start, stuck = 0, 0
        while True:
            end = markup.find("<", start + _FEED_CHARS)
            end = len(markup) if end == -1 else end
            self.parser.feed(markup[start:end])
            start = end
            if len(stack) > MAX_DEPTH and len(stack) != stuck:
                self.parser.feed("".join(f"</{tag.name}>" for tag in reversed(stack[MAX_DEPTH:])))
                stuck = len(stack)  # still deep: inside a comment, say; try again once it changes
            if start >= len(markup):
                break
        self.parser.close()


def decode(body: bytes, content_type: str = "") -> str:
    """``body`` as text, by the rules in the module docstring; never raises.

    >>> decode("café".encode("cp1252")), decode("café".encode("utf-8"), "text/html; charset=latin-1")
    ('café', 'café')
    """
    for bom, encoding in _BOMS:
        if body.startswith(bom):
            return body.decode(encoding, errors="replace")
    header = _CHARSET.search(content_type)
    meta = _META_CHARSET.search(body[:_SNIFF_BYTES])
    labels = [header.group(1)] if header else []
    if meta:
        labels.append(meta.group(1).decode("ascii", errors="replace"))
    for label in labels:
        encoding = _codec(label)
        if encoding is None:
            continue
        if encoding in _WESTERN and not body.isascii():
            encoding = "utf-8" if _is_utf8(body) else "cp1252"
        try:
            return body.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
    if _is_utf8(body):
        return body.decode("utf-8")
    sample = body[:_DETECT_SAMPLE]
    if sum(b > 127 for b in sample) > _DENSE_NON_ASCII * len(sample):
        guess = UnicodeDammit(sample, is_html=True, exclude_encodings=["utf-8"]).original_encoding
        if guess and _codec(guess):
            return body.decode(guess, errors="replace")
    return body.decode("cp1252", errors="replace")


def _codec(label: str) -> str | None:
    try:
        return codecs.lookup(label.strip().lower()).name.replace("-", "_")
    except (LookupError, ValueError):
        return None


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _cut(body: bytes, n: int) -> bytes:
    """The first ``n`` bytes, backed off so no UTF-8 character is split."""
    while n > 0 and (body[n] & 0xC0) == 0x80:
        n -= 1
    return body[:n]


def _start_of_tag(body: bytes, n: int) -> int:
    """Where the ``n``-th start tag begins (there are at least ``n``)."""
    return next(itertools.islice(_START_TAG.finditer(body), n - 1, None)).start()


def _join(parts: list[str]) -> str:
    return "\n".join(p for p in parts if p)


def _tag_text(tag: Tag | None) -> str:
    if tag is None:
        return ""
    return _SPACE.sub(" ", tag.get_text(" ")).strip()[:MAX_TITLE_CHARS]


def _title_from_url(url: str) -> str:
    parts = urlsplit(url)
    return parts.path.rstrip("/").rsplit("/", 1)[-1] or parts.netloc or url


def _landmarks(soup: BeautifulSoup) -> dict[str, Tag]:
    """The first ``title``, ``h1``, ``base`` (with href), ``main``, ``role-main`` and
    ``content-id`` elements, and ``article`` when there is exactly one: one pass over the tree
    (each ``soup.find`` would be another)."""
    found: dict[str, Tag] = {}
    articles = 0
    for tag in soup.descendants:
        if not isinstance(tag, Tag):
            continue
        name = tag.name
        if name in ("title", "h1", "main") and name not in found:
            found[name] = tag
        elif name == "base" and "base" not in found and tag.get("href"):
            found["base"] = tag
        elif name == "article":
            articles += 1
            found.setdefault("article", tag)
        if tag.attrs:
            if "role-main" not in found and tag.get("role") == "main":
                found["role-main"] = tag
            if "content-id" not in found and tag.get("id") in _CONTENT_IDS:
                found["content-id"] = tag
    if articles > 1:
        del found["article"]
    return found


def _is_clutter(tag: Tag) -> bool:
    attrs = tag.attrs
    if not attrs:
        return False
    if "hidden" in attrs or str(attrs.get("aria-hidden", "")).lower() == "true":
        return True
    if str(attrs.get("role", "")).lower() in _CLUTTER_ROLES:
        return True
    style = str(attrs.get("style", "")).replace(" ", "").lower()
    if "display:none" in style or "visibility:hidden" in style:
        return True
    names = attrs.get("class", [])
    names = " ".join(names) if isinstance(names, list) else str(names)
    return bool(_CLUTTER.search(f"{names} {attrs.get('id', '')}"))


class _Walker:
    """Walks a tree depth-first with an explicit stack, writing lines and collecting links."""

    def __init__(self, base: str, page_url: str, max_links: int) -> None:
        self.base, self.page_url, self.max_links = base, page_url, max_links
        self.lines: list[str] = []
        self.line: list[str] = []
        self.links: list[Link] = []
        self.numbers: dict[str, int] = {}  # url -> its number
        self.by_href: dict[str, int | None] = {}  # href as written -> its number, or None
        self.rows: list[int] = []  # cells so far in each open table row
        self.anchors: list[tuple[object, list[str]]] = []  # open <a>: href, its text

    def walk(self, root: Tag) -> None:
        stack: list[tuple[object, bool]] = [(root, False)]
        while stack:
            node, closing = stack.pop()
            if isinstance(node, NavigableString):
                if not isinstance(node, (Comment, Declaration, Doctype, ProcessingInstruction)):
                    self.write(str(node))
            elif isinstance(node, Tag):
                if closing:
                    self.end(node)
                elif node.name not in _DROP and not _is_clutter(node):
                    self.start(node)
                    stack.append((node, True))
                    stack.extend((child, False) for child in reversed(node.contents))
        self.newline()

    def write(self, text: str) -> None:
        self.line.append(text)
        if self.anchors:
            pieces = self.anchors[-1][1]
            if sum(map(len, pieces)) < MAX_LINK_TEXT_CHARS:
                pieces.append(text)

    def newline(self) -> None:
        line = _SPACE.sub(" ", "".join(self.line)).strip()
        self.line = []
        if line and line not in ("-", "|"):
            self.lines.append(line)

    def start(self, tag: Tag) -> None:
        name = tag.name
        if name in _HEADINGS:
            self.newline()
            if self.lines and self.lines[-1]:
                self.lines.append("")
            self.line.append("#" * _HEADINGS[name] + " ")
        elif name == "li":
            self.newline()
            self.line.append("- ")
        elif name == "tr":
            self.newline()
            self.rows.append(0)
        elif name in ("td", "th"):
            if self.rows:
                if self.rows[-1]:
                    self.line.append(" | ")
                self.rows[-1] += 1
            else:
                self.line.append(" ")
        elif name == "br":
            self.newline()
        elif name == "img" and self.anchors and tag.get("alt"):
            self.write(f" {tag['alt']} ")
        elif name == "a":
            self.anchors.append((tag.get("href"), []))
        elif name in _BLOCKS:
            self.newline()

    def end(self, tag: Tag) -> None:
        name = tag.name
        if name == "a" and self.anchors:
            href, pieces = self.anchors.pop()
            if isinstance(href, str):
                text = _SPACE.sub(" ", "".join(pieces)).strip()[:MAX_LINK_TEXT_CHARS]
                number = self._number(href, text or str(tag.get("title", "")).strip())
                if number:
                    self.line.append(f" [{number}]")
        elif name == "tr":
            if self.rows:
                self.rows.pop()
            self.newline()
        elif name in _HEADINGS or name in _BLOCKS:
            self.newline()

    def _url(self, href: str) -> str | None:
        """The absolute, fragment-free URL of a followable link, or None."""
        href = href.strip()
        if not href or href.startswith("#") or len(href) > MAX_URL_CHARS:
            return None
        try:
            url = urldefrag(urljoin(self.base, href))[0]
        except ValueError:  # e.g. a malformed IPv6 host
            return None
        if not url.startswith(("http://", "https://")) or url == self.page_url:
            return None
        return url

    def _number(self, href: str, text: str) -> int | None:
        """The number of the link ``href`` points to, numbering a new one while there is room;
        past ``max_links`` only an href already numbered gets one (resolving URLs is the costly
        part of a page full of links)."""
        if href in self.by_href:
            return self.by_href[href]
        number = None
        if len(self.links) < self.max_links:
            url = self._url(href)
            if url is not None:
                number = self.numbers.get(url)
                if number is None:
                    self.links.append(Link(text or url, url))
                    number = self.numbers[url] = len(self.links)
        self.by_href[href] = number
        return number

    def text(self) -> str:
        out: list[str] = []
        for line in self.lines:
            if line or (out and out[-1]):
                out.append(line)
        return "\n".join(out).strip()
