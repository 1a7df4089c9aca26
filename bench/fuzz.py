"""Fuzz every registered env with hostile actions and count the steps that raise (there must be
none), per id.

    python bench/fuzz.py                                   # 10^6 steps over every registered id
    python bench/fuzz.py --steps 20000 --envs searchgym/FictionalQA-Dense-v0

Actions are built from fragments by a seeded RNG: well-formed and broken calls of every tool in
both protocols, JSON nested thousands deep, integers of thousands of digits, lone surrogates,
NULs and control characters, up to 1 MB of text and thousands of calls in one turn. Each id runs
in both protocols (SelfSearch speaks tags only), the steps dealt round robin over the pairs.

Every id is made offline, as the tests make it: a 300-passage generated world, the tiny random
models of tests/conftest.py (a 2-layer BERT encoder for Dense and Hybrid, a cross-encoder for
Rerank, a Llama with SmolLM2's tokenizer writing eight tokens a search for Simulated, so queries
reach real tokenizers), one fake question per benchmark over a BM25 index of the tiny corpus,
and the FanOutQA fixtures; all of it is written to a temporary folder (``--work`` keeps it). An
id whose runtime is missing (Lucene without a JDK, FanOutQA without its extra) is listed as
skipped with the reason.

A step fails when it raises or when its observation is not text a tokenizer takes (it does not
encode as UTF-8). Prints, per id, the steps, failures, failures per million steps and the
slowest step with its action; then each distinct failure once. The Hypothesis version, a few
dozen actions over every id, is tests/envs/test_fuzz.py.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("search", "answer", "open", "follow", "find", "finish", "think", "information", "tool_call")
ARGS = ("query", "answer", "url", "link", "text", "x")
ODD = [
    "\x00",
    "\udc80",
    "\ud800",
    "\x1b[2J",
    "\u202e",
    "\r",
    "\x7f",
    "\ufeff",
    "é",
    "日本",
    "<",
    ">",
    '"',
    "\\",
]
WORDS = ["capital", "founder", "of", "the", "https://fictopedia.example/", "wiki/", "1", "#page=2", "Orvanta"]


# -- actions ---------------------------------------------------------------------------------------
def text(rng: random.Random) -> str:
    n = rng.choice([0, 1, 3, 8, 30])
    return "".join(rng.choice(ODD) if rng.random() < 0.3 else rng.choice(WORDS) + " " for _ in range(n))


def json_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([None, True, False, float("nan"), float("inf"), 1e308, -0.0])
    if kind == 1:
        return rng.randrange(-(10**30), 10**30)
    if kind in (2, 3, 4):
        return text(rng)
    if kind in (5, 6):
        return {rng.choice(ARGS): json_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [json_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def tool_call(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        depth = rng.choice([100, 1000, 5000, 100_000])
        body = '{"name": "search", "arguments": ' + "[" * depth + "]" * depth + "}"
    elif kind == 1:
        body = '{"name": "search", "arguments": {"query": ' + "9" * rng.choice([4301, 10_000]) + "}}"
    elif kind == 2:
        body = json.dumps(json_value(rng))
    else:
        args = {rng.choice(ARGS): json_value(rng) for _ in range(rng.randrange(3))}
        payload = {"name": rng.choice(TOOLS), "arguments": json.dumps(args) if kind == 3 else args}
        body = json.dumps(payload, ensure_ascii=rng.random() < 0.5)
    return f"<tool_call>{body}</tool_call>"


def action(rng: random.Random) -> str:
    kind = rng.randrange(10)
    if kind < 4:
        tag = rng.choice(TOOLS)
        inner = rng.choice(["https://fictopedia.example/" + "x" * 300, text(rng), text(rng)])
        return f"<{tag}>{inner}</{tag}>" if rng.random() < 0.8 else f"<{tag}>{inner}"
    if kind < 8:
        return tool_call(rng)
    if kind == 8:
        call = rng.choice(["<search> x </search>", '<tool_call>{"name": "search"}</tool_call>'])
        return call * rng.choice([2, 50, 5000])
    unit = rng.choice(["x", "\x00", "\udc80", "[", "<search>", "9"])
    return unit * rng.choice([20_001, 1 << 20])


# -- every id, offline -----------------------------------------------------------------------------
class Offline:
    """The data and tiny models every registered id is made with, written under ``work``."""

    def __init__(self, work: Path) -> None:
        sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "envs")]
        from conftest import (  # the tiny models the tests build
            FIXTURES,
            make_tiny_cross_encoder_dir,
            make_tiny_encoder_dir,
            make_tiny_llama_dir,
        )

        self.work, self.fixtures = work, FIXTURES
        corpus = FIXTURES / "tiny_corpus.jsonl"
        self.encoder = self._once(work / "tiny-bert", lambda d: make_tiny_encoder_dir(d, corpus))
        self.reranker = self._once(
            work / "tiny-cross-encoder", lambda d: make_tiny_cross_encoder_dir(d, corpus)
        )
        self.llama = self._once(work / "tiny-llama", make_tiny_llama_dir)
        self._simulator = None
        os.environ["XDG_CACHE_HOME"] = str(work / "xdg-cache")  # never the user's index cache
        os.environ["SEARCHGYM_DATA"] = str(self._data_dir(work / "data", corpus))

    @staticmethod
    def _once(directory: Path, write) -> Path:
        if not (directory / "config.json").is_file():
            directory.mkdir(parents=True, exist_ok=True)
            write(directory)
        return directory

    def _data_dir(self, data: Path, corpus: Path) -> Path:
        """One question per benchmark, a BM25 index of the tiny corpus and a small mini-wiki."""
        from test_backends import miniwiki_paragraphs

        from searchgym.envs.registry import BENCHMARK_ENVS
        from searchgym.retrievers import BM25
        from searchgym.tasks.datasets import BENCHMARKS
        from searchgym.tasks.miniwiki import miniwiki_path

        wiki = miniwiki_path(data)
        wiki.parent.mkdir(parents=True, exist_ok=True)
        wiki.write_text("".join(json.dumps(r) + "\n" for r in miniwiki_paragraphs()), encoding="utf-8")
        for _, dataset in BENCHMARK_ENVS:
            path = data / "qa" / dataset / f"{BENCHMARKS[dataset].eval_split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            row = {"id": "0", "question": "What is the capital of France?", "golden_answers": ["Paris"]}
            path.write_text(json.dumps(row) + "\n")
        if not (data / "indexes" / "wiki18-bm25").is_dir():
            BM25.from_corpus(corpus).save(data / "indexes" / "wiki18-bm25")
        return data

    def simulator(self):
        if self._simulator is None:
            from searchgym.agents.policies.hf import HFPolicy

            self._simulator = HFPolicy(str(self.llama), device="cpu")
        return self._simulator

    def kwargs(self, env_id: str) -> dict:
        """What ``searchgym.make(env_id, ...)`` needs here; raises `Skip` when a runtime is missing."""
        from searchgym.registry import RETRIEVERS

        family, _, backend = env_id.split("/")[1].rsplit("-v", 1)[0].partition("-")
        if family in ("FictionalQA", "MiniWiki") and backend.lower() in RETRIEVERS:
            made: dict = {"cache_dir": self.work / "index-cache"}
            made.update({"n_passages": 300} if family == "FictionalQA" else {"split": "train"})
            if backend in ("Dense", "Hybrid"):
                made["encoder"] = self.encoder
            if backend == "Rerank":
                made["reranker"] = self.reranker
            if backend == "Lucene":
                _need_java()
            return made
        if backend == "Simulated":
            return {
                "n_passages": 300,
                "generator": self.simulator(),
                "simulator_params": {"max_new_tokens": 8},
            }
        if family == "FanOutQA":
            try:
                import fanoutqa  # noqa: F401
            except ImportError as e:
                raise Skip('fanoutqa is an optional extra: pip install "searchgym[fanoutqa]"') from e
            return {"data_dir": self.fixtures / "fanoutqa"}
        return {"n_passages": 300} if family == "FictionalQA" else {}


class Skip(Exception):
    """An id that cannot run here, and why."""


def _need_java() -> None:
    from searchgym.retrievers.lucene import _start_java

    try:
        _start_java(None)
    except Exception as e:  # no pyserini, no JDK (pyjnius needs javac or JAVA_HOME)
        raise Skip(f"the lucene backend cannot run here: {' '.join(str(e).split())[:160]}") from e


def _takes_protocol(env_id: str) -> bool:
    """Whether the id's factory takes ``protocol`` (SelfSearch speaks tags only)."""
    from searchgym.envs.registry import env_takes

    return env_takes(env_id, "protocol")


# -- the run ---------------------------------------------------------------------------------------
@dataclass
class Tally:
    """One id's steps, failures and slowest step."""

    steps: int = 0
    failures: int = 0
    slowest: float = 0.0
    slowest_action: str = ""
    seconds: float = 0.0


def make_pairs(
    env_ids: list[str], offline: Offline, seed: int
) -> tuple[list[tuple[str, object]], dict[str, str]]:
    """(id, env) for each id and protocol, each reset and warmed up with one search; skipped ids."""
    import searchgym
    from searchgym.envs.tools import ToolCall

    pairs, skipped = [], {}
    for env_id in env_ids:
        try:
            kwargs = offline.kwargs(env_id)
        except Skip as e:
            skipped[env_id] = str(e)
            continue
        takes = _takes_protocol(env_id)
        for protocol in ("tags", "tool_calls") if takes else ("tags",):
            env = searchgym.make(env_id, **kwargs, **({"protocol": protocol} if takes else {}))
            env.reset(seed=seed)
            env.step(env.unwrapped.protocol.format_call(ToolCall("search", {"query": "capital"})))
            env.reset(seed=seed)
            pairs.append((env_id, env))
    return pairs, skipped


def run(pairs, steps: int, seed: int) -> tuple[dict[str, Tally], Counter[str]]:
    rng = random.Random(seed)
    tallies = {env_id: Tally() for env_id, _ in pairs}
    failures: Counter[str] = Counter()
    start = time.perf_counter()
    for i in range(steps):
        env_id, env = pairs[i % len(pairs)]
        act = action(rng)
        tick = time.perf_counter()
        failure = None
        try:
            observation, _, terminated, truncated, _ = env.step(act)
            observation.encode("utf-8")  # the agent's tokenizer reads it next
            if terminated or truncated:
                env.reset()
        except UnicodeEncodeError as e:
            failure = f"the observation is not UTF-8 text ({e.reason} at {e.start})"
            env.reset()
        except Exception:  # counted and reported: the point is to find them all
            failure = traceback.format_exc(limit=-1).strip().splitlines()[-1]
            env.reset()
        took = time.perf_counter() - tick
        tally = tallies[env_id]
        tally.steps += 1
        tally.seconds += took
        if failure is not None:
            tally.failures += 1
            failures[f"{env_id} {env.unwrapped.protocol.name}: {failure}"] += 1
        if took > tally.slowest:
            tally.slowest, tally.slowest_action = took, _shorten(act)
        if (i + 1) % 100_000 == 0:
            n = sum(t.failures for t in tallies.values())
            print(f"{i + 1:,} steps, {n} failures, {time.perf_counter() - start:.0f} s", flush=True)
    return tallies, failures


def _shorten(act: str, width: int = 64) -> str:
    """The action as Python writes it, cut to ``width`` characters."""
    shown = repr(act)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def report(tallies: dict[str, Tally], failures: Counter[str], skipped: dict[str, str], wall: float) -> None:
    steps = sum(t.steps for t in tallies.values())
    total = sum(t.failures for t in tallies.values())
    print(f"{steps:,} steps over {len(tallies)} ids in {wall:.0f} s ({steps / max(wall, 1e-9):,.0f}/s)")
    print(f"failures per million steps: {total / max(steps, 1) * 1e6:.1f} ({total} failures)")
    width = max(len(env_id) for env_id in tallies)
    head = f"{'steps':>8}  {'failures':>8}  {'per 10^6':>9}  {'mean ms':>8}  {'slowest ms':>10}"
    print(f"{'id':<{width}}  {head}  slowest action")
    for env_id, t in tallies.items():
        rate = t.failures / max(t.steps, 1) * 1e6
        mean = t.seconds / max(t.steps, 1) * 1000
        print(
            f"{env_id:<{width}}  {t.steps:>8,}  {t.failures:>8,}  {rate:>9.1f}  {mean:>8.2f}  "
            f"{t.slowest * 1000:>10.1f}  {t.slowest_action}"
        )
    for env_id, why in skipped.items():
        print(f"{env_id:<{width}}  skipped: {why}")
    for line, count in failures.most_common():
        print(f"  {count:>7}  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--steps", "--actions", type=int, default=1_000_000, help="total steps (default 10^6)"
    )
    parser.add_argument("--envs", default="", help="env ids, comma separated (default: every registered id)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--work", type=Path, default=None, help="keep the models and data here (default: a temp dir)"
    )
    args = parser.parse_args()
    import searchgym

    env_ids = args.envs.split(",") if args.envs else searchgym.list_ids()
    unknown = sorted(set(env_ids) - set(searchgym.list_ids()))
    if unknown:
        parser.error(f"unknown env id(s) {unknown}; see searchgym.list_ids()")
    work = args.work or Path(tempfile.mkdtemp(prefix="searchgym-fuzz-"))
    try:
        pairs, skipped = make_pairs(env_ids, Offline(work), args.seed)
        if not pairs:
            parser.error(f"no env can run here: {skipped}")
        start = time.perf_counter()
        tallies, failures = run(pairs, args.steps, args.seed)
        report(tallies, failures, skipped, time.perf_counter() - start)
        for _, env in pairs:
            env.close()
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
