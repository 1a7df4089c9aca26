"""Fuzz the envs with hostile actions and count the steps that raise (there must be none).

    python bench/fuzz.py                        # 10^6 actions over BM25, Web, Planner, SelfSearch
    python bench/fuzz.py --actions 20000 --envs searchgym/FictionalQA-BM25-v0

Actions are built from fragments by a seeded RNG: well-formed and broken calls of every tool in
both protocols, JSON nested thousands deep, integers of thousands of digits, lone surrogates,
NULs and control characters, up to 1 MB of text and thousands of calls in one turn. Prints the
crashes per million actions, each distinct exception once, the actions per second and the
slowest step. The Hypothesis version, a few hundred actions over every id, is
tests/envs/test_fuzz.py.
"""

from __future__ import annotations

import argparse
import json
import random
import time
import traceback
from collections import Counter

import searchgym
from searchgym.envs.tools import ToolCall

DEFAULT_ENVS = (
    "searchgym/FictionalQA-BM25-v0",
    "searchgym/FictionalQA-Web-v0",
    "searchgym/FictionalQA-Planner-v0",
    "searchgym/FictionalQA-SelfSearch-v0",
)
TAGS_ONLY = ("searchgym/FictionalQA-SelfSearch-v0",)
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--actions", type=int, default=1_000_000, help="total actions (default 10^6)")
    parser.add_argument("--envs", default=",".join(DEFAULT_ENVS), help="env ids, comma separated")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    envs = []
    for env_id in args.envs.split(","):
        for protocol in ("tags",) if env_id in TAGS_ONLY else ("tags", "tool_calls"):
            env = (
                searchgym.make(env_id, protocol=protocol)
                if env_id not in TAGS_ONLY
                else searchgym.make(env_id)
            )
            env.reset(seed=args.seed)
            env.step(env.unwrapped.protocol.format_call(ToolCall("search", {"query": "capital"})))  # warm up
            env.reset(seed=args.seed)
            envs.append((f"{env_id} {protocol}", env))
    crashes: Counter[str] = Counter()
    slowest = (0.0, "", "")
    start = time.perf_counter()
    for i in range(args.actions):
        name, env = envs[i % len(envs)]
        act = action(rng)
        tick = time.perf_counter()
        try:
            *_, terminated, truncated, _ = env.step(act)
            if terminated or truncated:
                env.reset()
        except Exception:  # counted and reported: the point is to find them all
            crashes[f"{name}: {traceback.format_exc(limit=-1).strip().splitlines()[-1]}"] += 1
            env.reset()
        took = time.perf_counter() - tick
        if took > slowest[0]:
            slowest = (took, name, repr(act[:80]) + ("…" if len(act) > 80 else ""))
        if (i + 1) % 100_000 == 0:
            print(
                f"{i + 1:,} actions, {sum(crashes.values())} crashes, {time.perf_counter() - start:.0f} s",
                flush=True,
            )
    wall = time.perf_counter() - start
    total = sum(crashes.values())
    rate = args.actions / wall
    print(f"{args.actions:,} actions over {len(envs)} env/protocol pairs in {wall:.0f} s ({rate:,.0f}/s)")
    print(f"crashes per million actions: {total / args.actions * 1e6:.1f} ({total} crashes)")
    print(f"slowest step: {slowest[0] * 1000:.1f} ms ({slowest[1]}, action {slowest[2]})")
    for line, count in crashes.most_common():
        print(f"  {count:>7}  {line}")
    for _, env in envs:
        env.close()


if __name__ == "__main__":
    main()
