"""Env steps per second of the scripted heuristic agent on generated corpora, with the time spent
in BM25 separated from the env's own overhead.

    python bench/env_steps.py                 # 10k and 100k passages, 400 episodes each
    python bench/env_steps.py --sizes 2000 --episodes 100

The peer is the retriever alone: the same queries sent straight to `BM25.search` in the same
process. ``vs_bm25_alone`` is the time the retriever alone needs for the episodes' queries over
the time the episodes took (1.0 = the env and agent add nothing); ``overhead_per_query`` is the
env's own time per step (parsing, formatting, bookkeeping, wrappers) over the time of one query.
"""

from __future__ import annotations

import argparse
import time

from searchgym.agents import HeuristicAgent, run_episodes
from searchgym.envs import SearchEnv, TurnLimit
from searchgym.retrievers import BM25, Doc
from searchgym.tasks.world import WorldConfig, generate_world


class Timed:
    """Adds up the seconds spent in one method of a wrapped object."""

    def __init__(self, inner, method: str) -> None:
        self.inner, self.method, self.seconds, self.calls = inner, method, 0.0, []

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name != self.method:
            return attr

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls.append(args)

        return timed


def bench_size(n_passages: int, n_episodes: int, seed: int) -> dict[str, float]:
    start = time.perf_counter()
    world = generate_world(WorldConfig(seed=seed, n_passages=n_passages))
    t_world = time.perf_counter() - start
    start = time.perf_counter()
    bm25 = BM25.build(Doc(p["id"], p["title"], p["text"]) for p in world.passages)
    t_build = time.perf_counter() - start
    tasks = list(world.tasks("dev"))[:n_episodes]

    retriever = Timed(bm25, "search")
    agents: list[Timed] = []

    def make_agent():
        agents.append(Timed(HeuristicAgent(), "act"))
        return agents[-1]

    start = time.perf_counter()
    episodes = run_episodes(lambda: TurnLimit(SearchEnv(tasks, retriever), 8), make_agent, tasks, n_envs=4)
    total = time.perf_counter() - start
    steps = sum(ep.n_turns for ep in episodes)
    t_agent = sum(a.seconds for a in agents)
    t_env = total - retriever.seconds - t_agent

    queries = [args[0] for args in retriever.calls]
    start = time.perf_counter()
    for q in queries:
        bm25.search(q, 3)
    t_peer = time.perf_counter() - start
    return {
        "passages": len(world.passages),
        "world_s": t_world,
        "build_s": t_build,
        "episodes": len(episodes),
        "steps": steps,
        "steps_per_s": steps / total,
        "bm25_share": retriever.seconds / total,
        "env_share": t_env / total,
        "agent_share": t_agent / total,
        "env_us_per_step": 1e6 * t_env / steps,
        "vs_bm25_alone": t_peer / total,
        "overhead_per_query": (t_env / steps) / (t_peer / len(queries)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cols = [
        ("passages", "{:,}"), ("world_s", "{:.1f}"), ("build_s", "{:.1f}"), ("steps", "{}"),
        ("steps_per_s", "{:.0f}"), ("bm25_share", "{:.0%}"), ("env_share", "{:.0%}"),
        ("agent_share", "{:.0%}"), ("env_us_per_step", "{:.0f}"), ("vs_bm25_alone", "{:.2f}"),
        ("overhead_per_query", "{:.3f}"),
    ]  # fmt: skip
    print("  ".join(name.rjust(9) for name, _ in cols))
    for size in args.sizes:
        row = bench_size(size, args.episodes, args.seed)
        print("  ".join(fmt.format(row[name]).rjust(max(9, len(name))) for name, fmt in cols), flush=True)


if __name__ == "__main__":
    main()
