"""How long `searchgym view` takes to open a directory of many episodes and show the first page.

    python bench/viewer.py                        # 100,000 episodes: 4 agents x 25,000
    python bench/viewer.py --episodes 20000 --agents 2 --out /tmp/view-bench --keep

Writes an eval directory (``metrics.json`` and one ``AGENT.jsonl`` per agent, each row an
`Episode.to_dict()` of a 2-search episode with three 60-word documents per search, about the
size `searchgym eval` writes), then times, in this process, building the app over it and
serving it with uvicorn, and the first page a browser loads through HTTP: the page, its scripts,
``/api/overview`` and ``/api/episodes`` (the first 50 rows). Then the summary rows with their EM
intervals (``/api/summary``: every episode's numbers, read in a background thread since the app
was built), a sorted and filtered page and one episode. The goal: the first page in under 2 s
for 100,000 episodes.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import httpx

from searchgym.agents import Episode, Turn
from searchgym.viewer import ViewerServer, create_app
from searchgym.viewer.page import SCRIPTS, STYLES

WORDS = ("the", "river", "city", "was", "founded", "by", "a", "merchant", "whose", "daughter", "led", "it")


def fake_episode(rng: random.Random, i: int) -> Episode:
    hops = rng.randint(1, 4)
    answer = f"Answer {i % 997}"
    turns, doc_ids = [], []
    for t in range(2):
        ids = [f"w0-{rng.randrange(10**6):06d}" for _ in range(3)]
        doc_ids += ids
        docs = "\n".join(
            f"Doc {k}(Title: Entity {d}) " + " ".join(rng.choices(WORDS, k=60)) for k, d in enumerate(ids, 1)
        )
        turns.append(Turn(f"<think>Step {t + 1}.</think>\n<search> entity {i} relation {t} </search>",
                          f"\n\n<information>{docs}</information>\n\n", 0.0, "search", None,
                          {"outcome": 0.0, "format": 0.0}, 240, f"entity {i} relation {t}", ids))  # fmt: skip
    solved = rng.random() < 0.4
    reward = {"outcome": float(solved), "format": 1.0}
    action = f"<answer> {answer if solved else 'wrong'} </answer>"
    turns.append(Turn(action, "", float(solved), "answer", None, reward))
    return Episode(
        f"fictional/dev/{hops}hop/{i:06d}", f"Question {i} about entity {i % 5000}?", [answer],
        {"source": "fictional", "hops": hops}, turns, answer if solved else "wrong", em=float(solved),
        f1=float(solved), cover_em=float(solved), evidence_recall=0.5, n_searches=2, obs_tokens=480,
        total_reward=float(solved), reward_components={"outcome": float(solved), "format": 1.0},
        terminated=True, evidence=doc_ids[:hops],
    )  # fmt: skip


def write_eval_dir(out: Path, episodes: int, agents: int, seed: int = 0) -> int:
    """``out/metrics.json`` and ``out/agent-K.jsonl``; returns the bytes written."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    size = 0
    for a in range(agents):
        with (out / f"agent-{a}.jsonl").open("w", encoding="utf-8") as f:
            for i in range(episodes // agents):
                line = json.dumps(fake_episode(rng, i).to_dict(), ensure_ascii=False) + "\n"
                size += f.write(line)
    metrics = {
        "env": "bench",
        "n": episodes // agents,
        "agents": {f"agent-{a}": {"all": {}} for a in range(agents)},
    }
    (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    return size


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write them (default: a temporary folder)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the episodes (with --out: reuse them if present)"
    )
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="view-bench-"))
    if not (args.keep and (out / "metrics.json").is_file()):
        tick = time.perf_counter()
        size = write_eval_dir(out, args.episodes, args.agents)
        took = time.perf_counter() - tick
        print(f"wrote {args.episodes:,} episodes ({size / 1e6:.0f} MB) in {took:.1f} s to {out}")
    try:
        start = time.perf_counter()
        app = create_app([out])
        with ViewerServer(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            served = time.perf_counter()
            for path in ["/", *(f"/static/{n}" for n in (*STYLES, *SCRIPTS)), "/api/overview"]:
                client.get(path).raise_for_status()
            page = client.get("/api/episodes", params={"limit": 50}).raise_for_status().json()
            first = time.perf_counter()
            summary = client.get("/api/summary").raise_for_status().json()
            summed = time.perf_counter()
            params = {"sort": "searches", "desc": 1, "hops": "2,3", "outcome": "failed", "limit": 50}
            client.get("/api/episodes", params=params).raise_for_status()
            client.get("/api/summary", params=params).raise_for_status()
            filtered = time.perf_counter()
            client.get(f"/api/episode/{page['total'] - 1}").raise_for_status()
            episode = time.perf_counter()
        print(f"episodes: {page['total']:,}  summary rows: {len(summary['groups'])}")
        print(f"app built and serving:          {served - start:.2f} s")
        print(f"first page loaded:              {first - start:.2f} s  (goal < 2 s)")
        print(f"summary rows with EM intervals: {summed - start:.2f} s  (every episode read)")
        print(f"sorted + filtered page:         {filtered - summed:.3f} s")
        print(f"one episode:                    {episode - filtered:.3f} s")
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
