"""Tokens/s through the gateway against the same policy called directly, at 1, 8 and 32 concurrent
programs, as ratios, in one run. Target: the gateway costs at most 10 % (a ratio of 0.90 or more)
at 8 or more programs.

    python bench/gateway.py                          # SmolLM2-135M on the CPU engine, 1, 8, 32 programs
    python bench/gateway.py --programs 1,8 --turns 2 --max-tokens 8 --repeats 1 --out runs/gateway

A program is a multi-turn chat: ``--turns`` chat completions of ``--max-tokens`` tokens each,
greedy, the conversation growing by the reply and a fixed user message (a fake search result) a
turn; programs differ by their question. Each count of programs is played two ways:

- **direct**: all the conversations batched into one ``policy.generate`` call a turn (what
  searchgym's own rollout does), their prompt ids built as the gateway builds them
  (`ChatPrompter.prompt` with the same `ChatTurn` records, so a later turn's prompt is the earlier
  prompt, the sampled ids, the end of the assistant turn and the new user turn);
- **gateway**: one `Gateway` in front of the same policy, each program a thread with its own
  episode key and its own ``openai.OpenAI`` client, all at once; the gateway's `Batcher` gathers
  their requests into generation calls (its default window, 0.02 s, unless ``--window-s``).

The two alternate, ``--repeats`` times (direct first on even repeats), so that load from other
processes hits both alike; the engine's kept keys and values are dropped before every run, so
neither reuses the other's. Printed per count: the median tokens/s of each (tokens counted from
the completions: ``usage.completion_tokens`` through the gateway), the ratio gateway/direct of the
medians and per repeat, the sizes of the batches the `Batcher` formed (size x how many, over all
repeats: N programs and T turns ideally give T x N), and whether every program's prompt and
sampled token ids through the gateway equal the direct ones (greedy: they must; a mismatch is a
failure, and the command exits 1). ``--out DIR`` writes results.json and gateway.png.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import torch
from tqdm.auto import tqdm

from searchgym.agents.gateway.chat import ChatPrompter, ChatTurn, normalize, reply_message, tools_key
from searchgym.agents.gateway.server import Gateway
from searchgym.agents.registry import load_policy
from searchgym.generation import SamplingParams

SYSTEM = (
    "You answer questions by searching a knowledge base. Think briefly, then write a search query "
    "between <search> and </search>, or give the answer between <answer> and </answer>."
)
SUBJECTS = ["river", "bridge", "painter", "treaty", "comet", "library", "volcano", "composer"]
WHAT = ["Who founded", "In which year was", "Where is", "Who named"]


def question(i: int) -> str:
    """Program ``i``'s question: distinct for every ``i``."""
    return f"{WHAT[i % len(WHAT)]} the {SUBJECTS[i // len(WHAT) % len(SUBJECTS)]} number {i}?"


def observation(turn: int) -> dict[str, str]:
    """The fixed user message after turn ``turn``'s reply: a fake search result."""
    docs = "\n".join(
        f"Doc {d} (Title: Record {turn}-{d}): The archive lists this entry under catalogue {100 * turn + d}; "
        f"it was revised in {1900 + 7 * d + turn} and moved to the northern collection."
        for d in (1, 2, 3)
    )
    return {"role": "user", "content": f"<information>\n{docs}\n</information>\nContinue."}


def start(i: int) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question(i)}]


def reply_text(tokenizer, completion) -> str:
    """The reply's text as the gateway answers it (no stop strings are set)."""
    return tokenizer.decode(completion.token_ids, skip_special_tokens=True)


def play_direct(policy, prompter: ChatPrompter, n: int, turns: int, params: SamplingParams) -> dict:
    """The ``n`` programs' conversations, one batched ``policy.generate`` call a turn."""
    messages = [start(i) for i in range(n)]
    earlier: list[list[ChatTurn]] = [[] for _ in range(n)]
    calls: list[list[tuple[list[int], list[int]]]] = [[] for _ in range(n)]
    prompt_s = 0.0
    tick = time.perf_counter()
    for turn in range(turns):
        t0 = time.perf_counter()
        prompts = [prompter.prompt(m, None, e) for m, e in zip(messages, earlier)]
        prompt_s += time.perf_counter() - t0
        completions = policy.generate(prompts, params)
        t0 = time.perf_counter()
        for i, (prompt, completion) in enumerate(zip(prompts, completions)):
            reply = reply_message(reply_text(policy.tokenizer, completion), None)
            said = normalize([reply])[0]
            earlier[i].append(ChatTurn(normalize(messages[i]), tools_key(None), said, prompt, completion))
            messages[i] = [*messages[i], reply, observation(turn)]
            calls[i].append((prompt, list(completion.token_ids)))
        prompt_s += time.perf_counter() - t0
    seconds = time.perf_counter() - tick
    tokens = sum(len(ids) for program in calls for _, ids in program)
    return {"seconds": seconds, "tokens": tokens, "calls": calls, "prompt_s": prompt_s}


def play_gateway(gateway: Gateway, n: int, turns: int, max_tokens: int) -> dict:
    """The same ``n`` programs as threads, each with its own key and client, through ``gateway``."""
    keys = [gateway.open_episode(f"program-{i}") for i in range(n)]
    clients = [openai.OpenAI(base_url=gateway.url + "/v1", api_key=k, max_retries=0) for k in keys]
    go = threading.Barrier(n + 1)
    before = len(gateway.batcher.batches)

    def program(i: int) -> tuple[int, list]:
        messages = start(i)
        tokens = 0
        go.wait()
        try:
            for turn in range(turns):
                reply = clients[i].chat.completions.create(
                    model="policy", messages=messages, max_tokens=max_tokens, temperature=0.0
                )
                tokens += reply.usage.completion_tokens
                content = reply.choices[0].message.content
                messages = [*messages, {"role": "assistant", "content": content}, observation(turn)]
        finally:  # the program has ended: the batcher stops waiting for it
            log = gateway.close_episode(keys[i])
        return tokens, [(c.prompt_ids, c.ids) for c in log.calls]

    with ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(program, i) for i in range(n)]
        go.wait()
        tick = time.perf_counter()
        done = [f.result() for f in futures]
        seconds = time.perf_counter() - tick
    for client in clients:
        client.close()
    return {
        "seconds": seconds,
        "tokens": sum(t for t, _ in done),
        "calls": [c for _, c in done],
        "batches": gateway.batcher.batches[before:],
    }


def cpu_name() -> str:
    """lscpu's "Model name" (the platform's processor where lscpu is missing)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown CPU"
    names = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")]
    return names[0] if names else platform.processor() or "unknown CPU"


def batch_summary(batches: list[int]) -> str:
    """``size x count`` for every batch size, largest first."""
    return " ".join(f"{size}x{count}" for size, count in sorted(Counter(batches).items(), reverse=True))


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["rows"]
    fig, ax = plt.subplots(figsize=(1.8 + 1.4 * len(rows), 3.8))
    xs = range(len(rows))
    for offset, key, label in ((-0.2, "direct_tokens_s", "direct"), (0.2, "gateway_tokens_s", "gateway")):
        bars = ax.bar([x + offset for x in xs], [r[key] for r in rows], 0.4, label=label)
        if key == "gateway_tokens_s":
            ax.bar_label(bars, labels=[f"{r['ratio']:.2f}x" for r in rows], fontsize=8)
    ax.set_xticks(list(xs), [str(r["programs"]) for r in rows])
    ax.set_xlabel("concurrent programs")
    ax.set_ylabel("tokens/s (median)")
    ax.set_title(
        f"{results['model']} ({results['policy']}), {results['turns']} turns x {results['max_tokens']} "
        f"tokens\n{results['cpu']}, {results['threads']} threads; label: gateway/direct",
        fontsize=8,
    )
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--policy", default="cpu", help="the policy backend (searchgym's registry)")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="a model name or a local directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--programs", default="1,8,32", help="counts of concurrent programs, comma-separated")
    parser.add_argument("--turns", type=int, default=3, help="chat completions a program")
    parser.add_argument("--max-tokens", type=int, default=32, help="max_tokens of every completion")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side per count; medians")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument(
        "--window-s", type=float, default=None, help="the Batcher's window (default: the Gateway's, 0.02 s)"
    )
    parser.add_argument("--out", type=Path, default=None, help="write results.json and gateway.png here")
    parser.add_argument("--no-progress", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    """Run the bench, print its table; the results (as results.json holds them)."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    counts = [int(n) for n in args.programs.split(",") if n.strip()]
    policy = load_policy(args.policy, args.model, args.seed)
    prompter = ChatPrompter(policy.tokenizer)
    params = SamplingParams(max_new_tokens=args.max_tokens, temperature=0.0)
    first = SamplingParams(max_new_tokens=4)
    policy.generate([prompter.prompt(start(0), None, [])], first)  # first-call costs, untimed

    rows = []
    window = {} if args.window_s is None else {"window_s": args.window_s}
    with Gateway(policy, params, **window) as gateway:
        key = gateway.open_episode("warm")
        with openai.OpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0) as warm:
            warm.chat.completions.create(model="policy", messages=start(0), max_tokens=2)  # untimed
        gateway.close_episode(key)
        bar = tqdm(total=2 * args.repeats * len(counts), disable=args.no_progress, desc="runs")
        for n in counts:
            runs: dict[str, list[dict]] = {"direct": [], "gateway": []}
            for r in range(args.repeats):
                for side in ("direct", "gateway")[:: 1 if r % 2 == 0 else -1]:
                    bar.set_postfix_str(f"{n} programs, {side}, repeat {r + 1}")
                    with gateway.batcher.lock:  # neither side reuses keys and values of the other
                        policy.drop_caches()
                        policy.reseed(args.seed)
                    if side == "direct":
                        runs[side].append(play_direct(policy, prompter, n, args.turns, params))
                    else:
                        runs[side].append(play_gateway(gateway, n, args.turns, args.max_tokens))
                    bar.update()
            rows.append(summarize(n, runs))
        bar.close()
    large = [r["ratio"] >= 0.9 for r in rows if r["programs"] >= 8]
    results = {
        "model": args.model,
        "policy": args.policy,
        "cpu": cpu_name(),
        "threads": torch.get_num_threads(),
        "turns": args.turns,
        "max_tokens": args.max_tokens,
        "window_s": gateway.batcher.window_s,
        "repeats": args.repeats,
        "rows": rows,
        "ids_match": all(r["ids_match"] == r["programs"] for r in rows),
        "target_met": all(large) if large else None,
    }
    report(results)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        plot(results, args.out / "gateway.png")
        print(f"wrote {args.out / 'results.json'} and {args.out / 'gateway.png'}")
    return results


def summarize(n: int, runs: dict[str, list[dict]]) -> dict:
    """One row of the table: medians, ratios, batch sizes and the token-id check."""
    rates = {side: [run["tokens"] / run["seconds"] for run in done] for side, done in runs.items()}
    direct, gateway = statistics.median(rates["direct"]), statistics.median(rates["gateway"])
    reference = runs["direct"][0]["calls"]
    same = [
        all(run["calls"][i] == reference[i] for run in runs["gateway"] + runs["direct"]) for i in range(n)
    ]
    batches = [run["batches"] for run in runs["gateway"]]
    return {
        "programs": n,
        "direct_tokens_s": direct,
        "gateway_tokens_s": gateway,
        "ratio": gateway / direct,
        "ratios": [g / d for g, d in zip(rates["gateway"], rates["direct"])],
        "direct_runs_tokens_s": rates["direct"],
        "gateway_runs_tokens_s": rates["gateway"],
        "tokens": [run["tokens"] for run in runs["gateway"]],
        "direct_prompt_s": [run["prompt_s"] for run in runs["direct"]],
        "batches": batches,
        "batch_summary": batch_summary([b for run in batches for b in run]),
        "ids_match": sum(same),
        "mismatched_programs": [i for i, ok in enumerate(same) if not ok],
    }


def report(results: dict) -> None:
    print(
        f"gateway against direct: {results['model']} ({results['policy']}), {results['turns']} turns x "
        f"{results['max_tokens']} tokens, greedy, Batcher window {results['window_s']:g} s, "
        f"median of {results['repeats']} runs"
    )
    print(f"CPU: {results['cpu']}, torch threads {results['threads']}")
    header = f"{'programs':>8} {'direct tok/s':>12} {'gateway tok/s':>13} {'ratio':>6}  {'per run':<18} "
    print(header + f"{'ids equal':>9}  batches (size x count)")
    for r in results["rows"]:
        per_run = " ".join(f"{x:.2f}" for x in r["ratios"])
        equal = f"{r['ids_match']}/{r['programs']}"
        print(
            f"{r['programs']:>8} {r['direct_tokens_s']:>12.1f} {r['gateway_tokens_s']:>13.1f} "
            f"{r['ratio']:>6.3f}  {per_run:<18} {equal:>9}  {r['batch_summary']}"
        )
    for r in results["rows"]:
        if r["mismatched_programs"]:
            wrong = r["mismatched_programs"]
            print(f"MISMATCH at {r['programs']} programs: the token ids of programs {wrong} differ")
    met = results["target_met"]
    verdict = "no count of 8 or more" if met is None else ("met" if met else "NOT met")
    print(f"target (ratio >= 0.90 at 8 or more programs): {verdict}")


if __name__ == "__main__":
    sys.exit(0 if main()["ids_match"] else 1)
