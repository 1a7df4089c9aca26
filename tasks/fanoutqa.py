"""FanOutQA's human-written questions, kept where the mini-Wikipedia corpus holds their evidence.

The ``fanoutqa`` package (``pip install "searchgym[fanoutqa]"``) ships FanOutQA's dev set: 310
questions, each decomposed into sub-questions; a sub-question without a decomposition of its own
(a *leaf*) names the Wikipedia page its answer was read from. The mini-Wikipedia corpus
(`searchgym.tasks.miniwiki`) holds only each article's lead paragraph, so a leaf counts as
*supported* when its page is a mini-wiki paragraph and that paragraph states the answer (every
answer string occurs in it, as whole words, after `normalize_answer`; a check by string, so a
short answer can be found there by chance).

A page is matched by its title: exactly, else by a key that ignores case, accents and
punctuation, when exactly one corpus title has that key (so "Lena (river)" finds "Lena River").

Tasks: every supported leaf is a one-hop task; every question with a decomposition (a top-level
question, or a sub-question that has sub-questions) is a multi-hop task when all its leaves are
supported, with the leaves' paragraphs as its evidence chain in FanOutQA's order (a sub-question
comes after those it depends on); each hop of ``metadata["chain"]`` has its page's title as the
``query`` the oracle searches. A question asked more than once (FanOutQA reuses sub-questions
across questions) is one task, with the evidence of its first occurrence, accepting each
supported answer it was given.

Answers become accepted strings: a string as it is, a number as Python writes it (``61.6``,
``1276000``: the metrics drop the commas of ``1,276,000``), a one-item list as its item. A yes/no
answer (the paragraph cannot be checked for it), a list of several items and a dict (FanOutQA's
fan-out answers, one value per entity) are no short span, so their questions are dropped.

On the pinned corpus and ``fanoutqa`` 1.1.1: of the 2,142 leaves, 559 have their page in the
corpus (one of them, "Lena (river)", by the key); 49 of those have no short answer (28 lists of
several items, 17 yes/no, 4 dicts); 88 of the other 510 have it stated in the lead paragraph,
76 distinct questions: 45 train, 31 dev, all one-hop. No multi-hop question is kept: the 8
top-level questions whose every page is in the corpus each have a leaf whose answer the lead
does not state (and 7 of them have a dict or list answer).

Splits: ``train`` and ``dev``, half each by a stable hash of the titles of a task's evidence
pages, so paraphrases about one page ("What is the capital of China?", "What is the capital city
of China?") fall in one split, and the two never share a question.

The task set is registered as ``fanoutqa``: ``searchgym.tasks.load("fanoutqa", split)`` is
`load_fanoutqa`.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError, import_optional
from searchgym.tasks.metrics import normalize_answer
from searchgym.tasks.miniwiki import _read_rows, checked_corpus
from searchgym.tasks.task import Task, TaskSet

SPLITS = ("train", "dev")
DEV_SHARE = 0.5


def answer_strings(answer: Any) -> tuple[str, ...]:
    """The accepted strings for a FanOutQA answer; empty when it is no short span (yes/no, a
    list of several items, a dict).

    >>> answer_strings(1276000), answer_strings(61.6), answer_strings(2.0), answer_strings(["Paris"])
    (('1276000',), ('61.6',), ('2',), ('Paris',))
    >>> answer_strings({"Uranus": "William Herschel"}), answer_strings(True)
    ((), ())
    """
    if isinstance(answer, bool):
        return ()
    if isinstance(answer, float) and answer.is_integer():
        answer = int(answer)
    if isinstance(answer, (int, float)):
        return (str(answer),)
    if isinstance(answer, str):
        return (answer.strip(),) if answer.strip() else ()
    if isinstance(answer, list) and len(answer) == 1:
        return answer_strings(answer[0])
    return ()


def title_key(title: str) -> str:
    """A title without case, accents and punctuation.

    >>> title_key("Lena (river)") == title_key("Lena River"), title_key("Škoda Auto")
    (True, 'skoda auto')
    """
    decomposed = unicodedata.normalize("NFKD", title)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return " ".join(re.sub(r"[\W_]+", " ", plain).split())


@dataclass(frozen=True)
class _Page:
    doc_id: str
    title: str
    text: str


class _Titles:
    """The corpus's paragraphs by title: exact, else by an unambiguous `title_key`."""

    def __init__(self, rows: Iterable[tuple[str, str, str]]) -> None:
        self.exact: dict[str, _Page] = {}
        keyed: dict[str, list[_Page]] = collections.defaultdict(list)
        for doc_id, title, text in rows:
            page = _Page(doc_id, title, text)
            self.exact.setdefault(title, page)
            keyed[title_key(title)].append(page)
        self.keyed = {key: pages[0] for key, pages in keyed.items() if len(pages) == 1}

    def find(self, title: str) -> _Page | None:
        title = unicodedata.normalize("NFC", title).replace("_", " ").strip()
        return self.exact.get(title) or self.keyed.get(title_key(title))


def _states(text: str, answers: Sequence[str]) -> bool:
    padded = f" {normalize_answer(text)} "
    return bool(answers) and all(f" {normalize_answer(a)} " in padded for a in answers)


def _leaves(question: Any) -> list[Any]:
    """The leaves under a FanOutQA question or sub-question, in FanOutQA's order."""
    if not question.decomposition:
        return [question]
    return [leaf for sub in question.decomposition for leaf in _leaves(sub)]


def _split_of(titles: Sequence[str]) -> str:
    digest = hashlib.sha256(("fanoutqa/split/" + "\n".join(titles)).encode("utf-8")).hexdigest()
    return "dev" if int(digest[:12], 16) / 16**12 < DEV_SHARE else "train"


def fanoutqa_tasks(
    questions: Sequence[Any], corpus: Iterable[tuple[str, str, str]]
) -> dict[str, tuple[Task, ...]]:
    """The tasks of FanOutQA ``questions`` (``fanoutqa.load_dev()``'s objects) whose evidence is
    in ``corpus`` (``(doc_id, title, text)`` rows), per split, in FanOutQA's order."""
    titles = _Titles(corpus)
    supported: dict[str, _Page] = {}  # leaf id -> the paragraph that states its answer

    def walk(node: Any, top_id: str) -> Iterable[tuple[Any, str]]:
        yield node, top_id
        for sub in node.decomposition:
            yield from walk(sub, top_id)

    nodes = [pair for q in questions for pair in walk(q, q.id)]
    for node, _ in nodes:
        if not node.decomposition and getattr(node, "evidence", None) is not None:
            page = titles.find(node.evidence.title)
            if page is not None and _states(page.text, answer_strings(node.answer)):
                supported[node.id] = page

    merged: dict[str, dict[str, Any]] = {}  # normalised question -> the task's parts
    for node, top_id in nodes:
        leaves = _leaves(node)
        if not all(leaf.id in supported for leaf in leaves):
            continue
        answers = answer_strings(node.answer)
        if node.decomposition and not answers:
            continue
        pages = list({supported[leaf.id].doc_id: supported[leaf.id] for leaf in leaves}.values())
        key = normalize_answer(node.question)
        part = merged.setdefault(key, {"node": node, "pages": pages, "answers": {}, "tops": {}})
        part["answers"].update(dict.fromkeys(answers))
        part["tops"][top_id] = None

    by_split: dict[str, list[Task]] = {split: [] for split in SPLITS}
    for part in merged.values():
        node, pages = part["node"], part["pages"]
        split = _split_of([p.title for p in pages])
        by_split[split].append(
            Task(
                id=f"fanoutqa/{split}/{node.id}",
                question=node.question.strip(),
                answers=tuple(part["answers"]),
                evidence=tuple(p.doc_id for p in pages),
                metadata={
                    "source": "fanoutqa",
                    "split": split,
                    "hops": len(pages),
                    "fanoutqa_id": node.id,
                    "fanoutqa_question_ids": list(part["tops"]),
                    "chain": [
                        {"entity": p.title, "relation": "evidence", "doc_id": p.doc_id, "query": p.title}
                        for p in pages
                    ],
                },
            )
        )
    return {split: tuple(tasks) for split, tasks in by_split.items()}


@functools.lru_cache(maxsize=2)
def _tasks(path: str, mtime_ns: int, size: int) -> Mapping[str, tuple[Task, ...]]:
    fanoutqa = import_optional("fanoutqa", "fanoutqa")
    return fanoutqa_tasks(fanoutqa.load_dev(), _read_rows(Path(path)))


def load_fanoutqa(split: str = "dev", data_dir: str | os.PathLike[str] | None = None) -> TaskSet:
    """FanOutQA's questions of ``split`` ("train" or "dev") whose evidence is in the mini-wiki
    corpus under ``data_dir`` (see `miniwiki_path`), in FanOutQA's order.

    Without the ``fanoutqa`` package this is a `DependencyNotInstalled` naming the extra; a
    missing corpus is a `DataNotFoundError` giving the command that fetches it.
    """
    path = checked_corpus(split, SPLITS, data_dir)
    stat = path.stat()
    tasks = _tasks(str(path.resolve()), stat.st_mtime_ns, stat.st_size)[split]
    if not tasks:
        raise ConfigError(
            f"{path} holds the evidence of no FanOutQA {split} question; is it the mini-Wikipedia corpus?"
        )
    return TaskSet(f"fanoutqa/{split}", tasks)
