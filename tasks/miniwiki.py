"""Mini-Wikipedia tasks: "which subject" questions over real Wikipedia lead paragraphs.

The corpus, ``{data_dir}/corpora/miniwiki.jsonl`` (rows ``{"id", "title", "text"}``, written by
``data_scripts/fetch_miniwiki.py``), holds 10,033 lead paragraphs. Each paragraph gives at most
one question: a sentence of it that names the article's subject, with every mention of the
subject masked as ``___``; the answer is the article's title. So an agent has something to
search for on real text, and the gold evidence (the source paragraph) is known.

A sentence is used only if, once masked, it still has `MIN_CONTENT_WORDS` content words and no
word of the title is left in it; a stable hash of the title picks one of those. The first
sentence of a paragraph (the one that defines the subject, the easiest) is picked only when no
other one qualifies. Mentions are the title, the title without a trailing "(...)"
disambiguation, their plurals, and, for a person (a title of capitalised words whose first
sentence has years in parentheses), the surname. The split of a paragraph (train 80%, dev 10%,
test 10%) is another stable hash of its title.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.tasks.datasets import default_data_dir
from searchgym.tasks.metrics import normalize_answer
from searchgym.tasks.task import Task, TaskSet

MASK = "___"
SPLITS = ("train", "dev", "test")
MIN_CONTENT_WORDS = 6
MAX_WORDS = 80
_SHARES = (("train", 0.8), ("dev", 0.9), ("test", 1.0))  # cumulative
_STOPWORDS = frozenset(
    "a an and are as at be been but by for from had has have he her his in into is it its of on "  # noqa: SIM905
    "or she that the their then there these they this to was were which who with also after "
    "before during over under between about than other such".split()
)
_WORD = re.compile(r"[^\W\d_]+")
_ABBREVIATION = re.compile(r"\b(?:[A-Za-z]|Mr|Mrs|Ms|Dr|St|Jr|Sr|No|Nos|vs|ca|fl|approx|e\.g|i\.e|U\.S)\.$")
_LIFESPAN = re.compile(r"\([^)]*\d{3,4}[^)]*\)")
_PARTICLES = frozenset(
    {"de", "da", "di", "del", "van", "von", "der", "le", "la", "of", "the", "al", "ibn", "bin"}
)


def miniwiki_path(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The corpus file: ``{data_dir}/corpora/miniwiki.jsonl`` (``data_dir`` defaults to
    ``$SEARCHGYM_DATA``, else ``~/.cache/searchgym/data``)."""
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    return root / "corpora" / "miniwiki.jsonl"


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences, keeping abbreviations and initials whole.

    >>> split_sentences("Arthur C. Clarke wrote it. It was filmed in 1968! Was it good?")
    ['Arthur C. Clarke wrote it.', 'It was filmed in 1968!', 'Was it good?']
    """
    sentences: list[str] = []
    for piece in re.split(r"(?<=[.!?])\s+(?=[\"“(\[A-Z0-9])", text.strip()):
        if sentences and _ABBREVIATION.search(sentences[-1]):
            sentences[-1] += " " + piece
        elif piece:
            sentences.append(piece)
    return sentences


def aliases(title: str) -> tuple[str, ...]:
    """Accepted answers: the title, then the title without a trailing "(...)" part.

    >>> aliases("Dune (novel)")
    ('Dune (novel)', 'Dune')
    """
    base = re.sub(r"\s*\([^()]*\)$", "", title).strip()
    return (title, base) if base and base != title else (title,)


def _is_person(base: str, first_sentence: str) -> bool:
    words = base.split()
    named = [w for w in words if w.lower() not in _PARTICLES]
    return (
        len(named) >= 2
        and all(w[:1].isupper() and w.replace(".", "").replace("-", "").isalpha() for w in named)
        and bool(_LIFESPAN.search(first_sentence))
    )


def mask_subject(sentence: str, title: str, *, person: bool = False) -> str:
    """Replace every mention of ``title`` in ``sentence`` with `MASK` (see the module docstring).

    >>> mask_subject("Tomatoes are fruit; a tomato is red.", "Tomato")
    '___ are fruit; a ___ is red.'
    >>> mask_subject("Einstein's theory, by Albert Einstein.", "Albert Einstein", person=True)
    "___'s theory, by ___."
    """
    masked = _mask(sentence, aliases(title), ignore_case=True, plurals=True)
    if person:
        masked = _mask(masked, [aliases(title)[-1].split()[-1]], ignore_case=False, plurals=False)
    return masked


def _mask(text: str, names: Sequence[str], *, ignore_case: bool, plurals: bool) -> str:
    """`MASK` over whole-word occurrences of ``names`` (longest first), by plain string search:
    compiling a regular expression per title would cost more than all the rest."""
    lowered = text.lower()
    haystack = lowered if ignore_case and len(lowered) == len(text) else text
    suffixes = ("es", "s", "") if plurals else ("",)
    spans: list[tuple[int, int]] = []
    for name in sorted(names, key=len, reverse=True):
        needle = name.lower() if haystack is lowered else name
        start = haystack.find(needle)
        while start >= 0:
            stem_end = start + len(needle)
            ends = [stem_end + len(x) for x in suffixes if haystack.startswith(x, stem_end)]
            end = next((e for e in ends if _whole_word(text, start, e)), None)
            if end is not None and all(end <= a or start >= b for a, b in spans):
                spans.append((start, end))
            start = haystack.find(needle, start + 1)
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + MASK + text[end:]
    return text


def _whole_word(text: str, start: int, end: int) -> bool:
    def word_char(i: int) -> bool:
        return 0 <= i < len(text) and (text[i].isalnum() or text[i] == "_")

    return not word_char(start - 1) and not word_char(end)


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOPWORDS]


def _usable(masked: str, title: str) -> bool:
    """A masked sentence is a fair question: the mask is in it, enough is left to search for,
    and no word of the title (nor, for a title of short words, the title itself) gives it away."""
    if MASK not in masked or len(masked.split()) > MAX_WORDS:
        return False
    words = set(_content_words(masked))
    if len(words) < MIN_CONTENT_WORDS:
        return False
    title_words = set(_content_words(aliases(title)[-1]))
    if title_words:
        return not title_words & words
    padded = f" {normalize_answer(masked)} "
    return not any(f" {normalize_answer(a)} " in padded for a in aliases(title))


def _stable_fraction(key: str) -> float:
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:12], 16) / 16**12


def split_of(title: str) -> str:
    """The split of the paragraph titled ``title``: train, dev or test (80/10/10, stable)."""
    u = _stable_fraction(f"miniwiki/split/{title}")
    return next(split for split, upper in _SHARES if u < upper)


def question_for(doc_id: str, title: str, text: str) -> Task | None:
    """The question made from one paragraph, or None if no sentence of it qualifies."""
    sentences = split_sentences(text)
    if not sentences or not re.search(r"[^\W\d_]", title):
        return None
    person = _is_person(aliases(title)[-1], sentences[0])
    masked = [mask_subject(s, title, person=person) for s in sentences]
    usable = [i for i, m in enumerate(masked) if _usable(m, title)]
    pool = [i for i in usable if i > 0] or usable
    if not pool:
        return None
    pick = pool[int(_stable_fraction(f"miniwiki/sentence/{title}") * len(pool))]
    split = split_of(title)
    query = masked[pick]
    return Task(
        id=f"miniwiki/{split}/{doc_id}",
        question=f'Which subject is masked as {MASK} in this encyclopedia sentence? "{query}"',
        answers=aliases(title),
        evidence=(doc_id,),
        metadata={
            "source": "miniwiki",
            "split": split,
            "hops": 1,
            "title": title,
            "sentence_index": pick,
            "chain": [{"entity": title, "relation": "subject", "doc_id": doc_id, "query": query}],
        },
    )


def _read_rows(path: Path) -> list[tuple[str, str, str]]:
    rows = []
    with path.open(encoding="utf-8") as lines:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                rows.append((str(row["id"]), str(row["title"]), str(row["text"])))
            except (ValueError, KeyError, TypeError) as e:
                raise ConfigError(
                    f'{path}, line {lineno}: expected a JSON row {{"id", "title", "text"}} ({e!r}); '
                    "write the file again with data_scripts/fetch_miniwiki.py"
                ) from e
    return rows


@functools.lru_cache(maxsize=2)
def _questions(path: str, mtime_ns: int, size: int) -> dict[str, tuple[Task, ...]]:
    """Every question of the corpus at ``path``, per split (cached per version of the file)."""
    by_split: dict[str, list[Task]] = {split: [] for split in SPLITS}
    for doc_id, title, text in _read_rows(Path(path)):
        task = question_for(doc_id, title, text)
        if task is not None:
            by_split[task.metadata["split"]].append(task)
    return {split: tuple(tasks) for split, tasks in by_split.items()}


def checked_corpus(split: str, splits: Sequence[str], data_dir: str | os.PathLike[str] | None) -> Path:
    """The mini-wiki corpus file under ``data_dir`` (see `miniwiki_path`) for a task set whose
    splits are ``splits``: a `ConfigError` for another split, a `DataNotFoundError` giving the
    command that fetches a missing corpus."""
    if split not in splits:
        close = difflib.get_close_matches(str(split), splits, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"unknown split {split!r}; {hint}choose one of {', '.join(splits)}")
    path = miniwiki_path(data_dir)
    if not path.is_file():
        raise DataNotFoundError(
            f"{path} does not exist; create it with: python data_scripts/fetch_miniwiki.py "
            f"--out {shlex.quote(str(path))}"
        )
    return path


def load_miniwiki(split: str = "dev", data_dir: str | os.PathLike[str] | None = None) -> TaskSet:
    """The mini-Wikipedia questions of ``split`` ("train", "dev" or "test"), in corpus order.

    A missing corpus is a `DataNotFoundError` giving the command that fetches it.
    """
    path = checked_corpus(split, SPLITS, data_dir)
    stat = path.stat()
    tasks = _questions(str(path.resolve()), stat.st_mtime_ns, stat.st_size)[split]
    if not tasks:
        raise ConfigError(f"{path} gives no {split} questions; is it the mini-Wikipedia corpus?")
    return TaskSet(f"miniwiki/{split}", tasks)
