"""BM25 over Lucene with pyserini 0.25 (Anserini): the optional backend that scales to millions of
documents and ranks as pyserini's ``LuceneSearcher`` does (Search-R1's wiki-18 retriever).

Documents are indexed as ``title + "\\n" + text`` with Anserini's default English analyzer (Porter
stemming, Lucene's 33 stopwords); each one's JSON row is stored, so `doc` and search results give
back the exact title and text. A query that shares no term with the corpus returns ``[]``.

Ranking is Anserini's: by score, ties by document id in string order (deterministic, but not
corpus order), and scores are rounded to 1e-4 with each tied score lowered by 1e-6 so the order
is strict. ``batch_search(qs, k)`` equals ``[search(q, k) for q in qs]`` exactly.

Only Anserini's Java classes are used, through pyjnius as pyserini does: importing
``pyserini.search`` would also load torch, transformers and an OpenAI client (15-20 s, and an
error without ``OPENAI_API_KEY``). The JVM starts once per process, on the first build or load;
JVM options (``jvm_options=`` or the ``SEARCHGYM_JVM_OPTIONS`` variable, e.g. ``-Xmx8g``) apply
only then. Without them the JVM sizes its heap itself (up to a quarter of the machine's memory).
The saved ``lucene/`` folder is a plain Anserini index that pyserini's ``LuceneSearcher`` opens.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from itertools import islice
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from searchgym.errors import (
    ConfigError,
    DataNotFoundError,
    DependencyNotInstalled,
    RetrieverError,
    SearchGymError,
    import_optional,
)
from searchgym.retrievers.base import Doc, check_batch
from searchgym.retrievers.corpus import doc_from_row, read_corpus
from searchgym.retrievers.index import META_FILE, read_meta, staged, write_meta
from searchgym.retrievers.unique_ids import unique_ids

logger = logging.getLogger(__name__)

JVM_OPTIONS_ENV = "SEARCHGYM_JVM_OPTIONS"
MIN_JAVA = 11  # Anserini 0.25 is compiled for Java 11; CI and the README install 17
_JAVA_HINT = "apt-get install -y openjdk-17-jdk-headless (or point JAVA_HOME at a JDK 11 or newer)"
_INDEX = "lucene"
_BATCH = 10_000  # documents handed to Java per call
_MAX_CLAUSES = 1 << 16  # distinct query terms; Lucene's default of 1024 fails on long queries
_JAVA_BLANK = "".join(map(chr, range(33)))  # what Java's String.trim() strips


@dataclass(frozen=True)
class _Java:
    """The Java classes this module uses, once the JVM runs."""

    searcher: Any  # io.anserini.search.SimpleSearcher
    indexer: Any  # io.anserini.index.SimpleIndexer
    array_list: Any
    error: type[Exception]  # jnius.JavaException


_java: _Java | None = None


def java_major(spec: str) -> int:
    """The major version in ``java.specification.version``.

    >>> java_major("1.8"), java_major("17")
    (8, 17)
    """
    head, _, rest = spec.partition(".")
    return int(rest.partition(".")[0] if head == "1" else head)


def _check_java(spec: str) -> None:
    if java_major(spec) < MIN_JAVA:
        raise DependencyNotInstalled(
            f"pyserini 0.25 needs Java {MIN_JAVA} or newer, this JVM is Java {spec}; install one with: "
            f"{_JAVA_HINT}"
        )


def _start_java(jvm_options: Sequence[str] | None) -> _Java:
    """Start the JVM with Anserini's jar (once per process) and load the classes used here."""
    global _java
    import_optional("pyserini", "lucene")
    jnius_config = import_optional("jnius_config", "lucene")
    options = shlex.split(os.environ.get(JVM_OPTIONS_ENV, "")) if jvm_options is None else list(jvm_options)
    if _java is not None or jnius_config.vm_running:
        missing = [o for o in options if o not in jnius_config.get_options()]
        if missing and jvm_options is not None:
            raise ConfigError(
                f"the JVM already runs without {missing}: JVM options apply only before the first Lucene "
                f"index of a process is built or loaded (or set {JVM_OPTIONS_ENV} before starting Python)"
            )
        if missing:
            logger.warning("the JVM already runs; %s=%s is not applied", JVM_OPTIONS_ENV, " ".join(missing))
    else:
        jnius_config.add_options(*options)
    if _java is not None:
        return _java
    if jnius_config.vm_running and "pyserini.pyclass" not in sys.modules:
        raise ConfigError(
            "a JVM was started (by importing jnius) before pyserini could put Anserini's jar on its class "
            "path; build or load a Lucene index, or import pyserini.pyclass, before anything else starts it"
        )
    try:
        pyclass = importlib.import_module("pyserini.pyclass")  # starts the JVM
    except ImportError as e:
        raise DependencyNotInstalled(
            f'pyserini could not be imported ({e}); install it with: pip install "searchgym[lucene]"'
        ) from e
    except Exception as e:  # pyjnius raises plain exceptions when it finds no javac nor JAVA_HOME
        raise DependencyNotInstalled(
            f"pyserini needs a Java JDK and pyjnius found none ({e}); install one with: {_JAVA_HINT}"
        ) from e
    autoclass = pyclass.autoclass
    _check_java(autoclass("java.lang.System").getProperty("java.specification.version"))
    _quiet_logs(autoclass)
    autoclass("org.apache.lucene.search.IndexSearcher").setMaxClauseCount(_MAX_CLAUSES)
    _java = _Java(
        searcher=autoclass("io.anserini.search.SimpleSearcher"),
        indexer=autoclass("io.anserini.index.SimpleIndexer"),
        array_list=autoclass("java.util.ArrayList"),
        error=importlib.import_module("jnius").JavaException,
    )
    return _java


def _quiet_logs(autoclass) -> None:
    """Raise Anserini's log level from DEBUG to WARN (its INFO lines go to stdout); the one line
    log4j writes to stderr while it starts on Java 17 is dropped."""
    from jnius import cast

    system = autoclass("java.lang.System")
    stderr = system.err
    system.setErr(autoclass("java.io.PrintStream")(autoclass("java.io.OutputStream").nullOutputStream()))
    try:
        loader = autoclass("java.lang.ClassLoader").getSystemClassLoader()
        manager = autoclass("org.apache.logging.log4j.LogManager")
        context = cast("org.apache.logging.log4j.core.LoggerContext", manager.getContext(loader, False))
        context.getConfiguration().getRootLogger().setLevel(autoclass("org.apache.logging.log4j.Level").WARN)
        context.updateLoggers()
    finally:
        system.setErr(stderr)


def _check_bm25(k1: float, b: float) -> None:
    if isinstance(k1, bool) or not isinstance(k1, int | float) or k1 < 0:
        raise ConfigError(f"k1 must be a number >= 0, got {k1!r}")
    if isinstance(b, bool) or not isinstance(b, int | float) or not 0 <= b <= 1:
        raise ConfigError(f"b must be a number between 0 and 1, got {b!r}")


def _check_threads(threads: int) -> None:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < -1:
        raise ConfigError(f"threads must be a positive integer, 0 or -1 (one per CPU core), got {threads!r}")


def _n_threads(threads: int) -> int:
    return (os.cpu_count() or 1) if threads < 0 else max(1, threads)


def _raw(doc: Doc) -> str:
    """The stored row: pyserini's ``{"id", "contents"}`` plus the title, which splits
    ``contents`` back into title and text exactly."""
    row = {"id": doc.id, "contents": f"{doc.title}\n{doc.text}", "title": doc.title}
    return json.dumps(row, ensure_ascii=False)


def _doc(raw: str, score: float = 0.0) -> Doc:
    row = json.loads(raw)
    if "title" not in row:  # a row stored by another tool
        doc = doc_from_row(row)
        return Doc(doc.id, doc.title, doc.text, score)
    title = row["title"]
    return Doc(str(row["id"]), title, row["contents"][len(title) + 1 :], score)


def _index(java: _Java, docs: Iterable[Doc], path: Path, threads: int, show_progress: bool) -> int:
    """Index ``docs`` into a new Lucene index at ``path``; returns how many it holds. Documents
    with neither title nor text are skipped (Lucene refuses them), with a warning."""
    argv = ["-input", "", "-index", str(path), "-collection", "JsonCollection", "-storeRaw"]
    indexer = java.indexer([*argv, "-threads", str(_n_threads(threads))])
    indexed = skipped = 0
    total = len(docs) if isinstance(docs, Sequence) else None
    docs_iter: Iterator[Doc] = iter(docs)
    try:
        with tqdm(total=total, desc="indexing", unit="doc", disable=not show_progress) as bar:
            while batch := list(islice(docs_iter, _BATCH)):
                raws = [_raw(d) for d in batch if (d.title + d.text).strip(_JAVA_BLANK)]
                added = indexer.addRawDocuments(raws) if raws else 0
                if added != len(raws):
                    raise SearchGymError(
                        f"Lucene indexed {added} of {len(raws)} documents of a batch; Java's error is above"
                    )
                indexed, skipped = indexed + added, skipped + len(batch) - len(raws)
                bar.update(len(batch))
    finally:
        indexer.close()
    if not indexed:
        shutil.rmtree(path, ignore_errors=True)
        raise ValueError("cannot build a Lucene index from an empty corpus")
    if skipped:
        logger.warning("%d documents with no title and no text were not indexed (Lucene skips them)", skipped)
    return indexed


class Lucene:
    """BM25 (Lucene's, k1 0.9 and b 0.4 like pyserini) over an Anserini index.

    Build with `Lucene.build` (or `from_corpus`), save to a directory, `Lucene.load` it back.
    ``n_threads``: threads one `batch_search` spreads its queries over (1 or 0: the calling
    thread; -1: one per CPU core). `close` releases the index (and a built, unsaved one's files).
    """

    def __init__(
        self,
        java: _Java,
        path: Path,
        params: dict,
        *,
        threads: int = 1,
        owned: tempfile.TemporaryDirectory | None = None,
    ) -> None:
        self._java = java
        self._path = path
        self._owned = owned  # the temporary folder of an index built but not loaded
        self._searcher = java.searcher(str(path))
        self._n_docs = self._searcher.get_total_num_docs()
        self.params: dict = {}
        self.set_bm25(params["k1"], params["b"])
        self.n_threads = threads

    @classmethod
    def build(
        cls,
        docs: Iterable[Doc],
        *,
        k1: float = 0.9,
        b: float = 0.4,
        threads: int = 1,
        show_progress: bool = False,
        jvm_options: Sequence[str] | None = None,
    ) -> Lucene:
        """Index ``docs`` into a temporary folder (`save` copies it). ``threads`` index in
        parallel and become `n_threads`; ``jvm_options`` apply if the JVM is not running yet."""
        _check_bm25(k1, b)
        _check_threads(threads)
        java = _start_java(jvm_options)
        owned = tempfile.TemporaryDirectory(prefix="searchgym-lucene-")
        path = Path(owned.name) / _INDEX
        try:
            _index(java, docs, path, threads, show_progress)
        except BaseException:
            owned.cleanup()
            raise
        return cls(java, path, {"k1": k1, "b": b}, threads=threads, owned=owned)

    @classmethod
    def from_corpus(cls, path: str | os.PathLike, **kwargs) -> Lucene:
        """Build from a JSONL corpus file (either row shape, see `retrievers.corpus`), streaming it.
        A repeated id is a `ConfigError` naming its lines, as for every index kind."""
        return cls.build(_read_unique(path), **kwargs)

    @classmethod
    def build_streaming(
        cls, corpus: str | os.PathLike, out: str | os.PathLike, *, show_progress: bool = False, **kwargs
    ) -> Lucene:
        """Index a corpus file straight into ``out`` (no temporary copy) and open it; what
        `searchgym index build --kind lucene` runs. ``kwargs`` are `build`'s."""
        k1, b = kwargs.pop("k1", 0.9), kwargs.pop("b", 0.4)
        threads, jvm_options = kwargs.pop("threads", 1), kwargs.pop("jvm_options", None)
        if kwargs:
            raise ConfigError(
                f"unknown options for a lucene index: {sorted(kwargs)}; it takes k1, b, threads"
            )
        _check_bm25(k1, b)
        _check_threads(threads)
        java = _start_java(jvm_options)
        out = Path(out)
        with staged(out) as tmp:
            n_docs = _index(java, _read_unique(corpus), tmp / _INDEX, threads, show_progress)
            write_meta(tmp, _meta(n_docs, k1, b))
        return cls(java, out / _INDEX, {"k1": k1, "b": b}, threads=threads)

    def save(self, directory: str | os.PathLike) -> None:
        """Write the index to ``directory/lucene`` and its description to ``searchgym.json``."""
        directory = Path(directory)
        if (directory / _INDEX).resolve() == self._path.resolve():  # its own folder: new parameters
            write_meta(directory, _meta(self._n_docs, **self.params))
            return
        with staged(directory) as tmp:  # an index there is replaced whole or not at all
            shutil.copytree(self._path, tmp / _INDEX)
            write_meta(tmp, _meta(self._n_docs, **self.params))

    @classmethod
    def load(
        cls, directory: str | os.PathLike, *, threads: int = 1, jvm_options: Sequence[str] | None = None
    ) -> Lucene:
        directory = Path(directory)
        meta = read_meta(directory, "lucene", "Lucene.from_corpus(CORPUS).save(DIR)")
        if not (directory / _INDEX).is_dir():
            raise DataNotFoundError(
                f"{directory} has a {META_FILE} but no {_INDEX}/ folder: copy the whole index"
            )
        _check_threads(threads)
        java = _start_java(jvm_options)
        return cls(java, directory / _INDEX, {"k1": meta["k1"], "b": meta["b"]}, threads=threads)

    def set_bm25(self, k1: float, b: float) -> None:
        """Score with other BM25 parameters from now on (`save` records them)."""
        _check_bm25(k1, b)
        self._open().set_bm25(float(k1), float(b))
        self.params = {"k1": k1, "b": b}

    def __len__(self) -> int:
        return self._n_docs

    def search(self, query: str, k: int = 3) -> list[Doc]:
        check_batch([query], k)
        if not isinstance(query, str):
            raise TypeError(f"a query is a string, got {type(query).__name__}")
        if not query.strip():
            return []
        try:
            hits = self._open().search(query, min(k, self._n_docs))
        except self._java.error as e:
            raise RetrieverError(f"Lucene could not search for {query[:100]!r}: {e}") from e
        return [_doc(hit.lucene_document.get("raw"), hit.score) for hit in hits]

    def batch_search(self, queries: Sequence[str], k: int = 3, threads: int | None = None) -> list[list[Doc]]:
        """`search` for each query; ``threads`` (default `n_threads`) run them in parallel."""
        check_batch(queries, k)
        threads = self.n_threads if threads is None else threads
        _check_threads(threads)
        if any(not isinstance(q, str) for q in queries):
            raise TypeError("queries are strings")
        live = [i for i, q in enumerate(queries) if q.strip()]
        if len(live) <= 1:
            return [self.search(q, k) for q in queries]
        threads = min(_n_threads(threads), len(live))  # one Java call is cheaper than a loop, even so
        texts, ids = self._java.array_list(), self._java.array_list()
        for i in live:
            texts.add(queries[i])
            ids.add(str(i))
        found = self._open().batch_search(texts, ids, min(k, self._n_docs), threads)
        results: list[list[Doc]] = [[] for _ in queries]
        for i in live:
            hits = found.get(str(i))
            if hits is None:  # Java failed on this query: search it alone to raise its error
                results[i] = self.search(queries[i], k)
            else:
                results[i] = [_doc(hit.lucene_document.get("raw"), hit.score) for hit in hits]
        return results

    def doc(self, doc_id: str) -> Doc | None:
        raw = self._open().doc_raw(str(doc_id))
        return None if raw is None else _doc(raw)

    def close(self) -> None:
        """Release the index; an index built and never saved is deleted. Idempotent."""
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None
        if self._owned is not None:
            self._owned.cleanup()
            self._owned = None

    def _open(self):
        if self._searcher is None:
            raise ValueError("this Lucene index is closed")
        return self._searcher


def _read_unique(corpus: str | os.PathLike) -> Iterator[Doc]:
    """The documents of ``corpus``; a repeated id raises within 10,000 documents of it (before
    they are indexed), keeping 8 bytes per document rather than a dict of every id."""
    return unique_ids(corpus, read_corpus(corpus, unique_ids=False))


def _meta(n_docs: int, k1: float, b: float) -> dict:
    return {
        "kind": "lucene",
        "backend": "pyserini",
        "pyserini": version("pyserini"),
        "n_docs": n_docs,
        "k1": k1,
        "b": b,
    }
