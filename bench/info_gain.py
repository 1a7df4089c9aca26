"""Information-gain scoring (IGPO) of a GRPO step's episodes: the CPU engine's kept caches, one
cached read per episode, and one padded row per turn.

    python bench/info_gain.py                              # SmolLM2-135M-Instruct, 16 episodes
    python bench/info_gain.py --model runs/quickstart/checkpoints/step-000000 --episodes 32

The policy plays ``--episodes`` sampled episodes of the quickstart's 2-hop training tasks
(``configs/quickstart.yaml``: its env, turn limit and tokens per turn), then their turn-by-turn
answer probabilities are computed three ways, in turn, ``--repeats`` times each:

- engine: `batch_turn_answer_probabilities` given the engine's `cached_kv`, as the trainer calls
  it: each episode's keys and values are those the engine computed while playing it, and only
  every turn's answer is read behind its part of them, the turns of several episodes in one
  forward;
- searchgym: `batch_turn_answer_probabilities` alone, which first reads each episode once into
  keys and values;
- rows: every turn's context as its own row of `score_answers` (right-padded, batches of 8,
  longest first), the way it was computed before, which reads the episode's start once per turn.

Printed: the tokens each way reads, the median seconds, the ratios to the engine's, and the
largest difference of the probabilities from the rows'. Use a warm-started checkpoint
(``--model``): SmolLM2 as loaded writes few valid actions, so its episodes are short.
"""

from __future__ import annotations

import argparse
import statistics
import time

import quickstart_episodes  # bench/'s helper: the script's folder is on sys.path
import torch

from searchgym.agents.train.info_gain import answer_tokens, batch_turn_answer_probabilities, score_answers


def per_row(model, trajectories, answers) -> list[list[float]]:
    rows, sizes = [], []
    for traj, (prefix, answer) in zip(trajectories, answers):
        rows += [(traj.prompt_ids + traj.ids[:s], prefix, answer) for s in traj.turn_starts]
        sizes.append(len(traj.turn_starts))
    probabilities = score_answers(model, rows, batch_size=8).exp().tolist()
    out, start = [], 0
    for n in sizes:
        out.append(probabilities[start : start + n])
        start += n
    return out


def timed(fn) -> tuple[float, list[list[float]]]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--config", default="configs/quickstart.yaml")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    _, policy, env, episodes = quickstart_episodes.play(args.model, args.config, args.episodes)
    trajectories = [ep.trajectory for ep in episodes]
    answers = [answer_tokens(policy.tokenizer, env.unwrapped.protocol, ep.answers[0]) for ep in episodes]
    model = policy.model
    torch.set_grad_enabled(True)  # as in training: the scorers turn it off themselves

    ways = {
        "engine": lambda: batch_turn_answer_probabilities(model, trajectories, answers, policy.cached_kv),
        "searchgym": lambda: batch_turn_answer_probabilities(model, trajectories, answers),
        "rows": lambda: per_row(model, trajectories, answers),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    results = {}
    for _ in range(args.repeats):
        for name, way in ways.items():
            seconds, results[name] = timed(way)
            times[name].append(seconds)
    difference = {
        name: max(abs(a - b) for x, y in zip(result, results["rows"]) for a, b in zip(x, y))
        for name, result in results.items()
    }
    read = {name: 0 for name in ways}
    for traj, (prefix, answer) in zip(trajectories, answers):
        contexts = [len(traj.prompt_ids) + s for s in traj.turn_starts]
        probes = len(contexts) * (1 + len(prefix) + len(answer))
        read["engine"] += probes
        read["searchgym"] += max(contexts) - 1 + probes
        read["rows"] += sum(contexts) + len(contexts) * (len(prefix) + len(answer))
    turns = sum(len(t.turn_starts) for t in trajectories)
    tokens = sum(len(t.prompt_ids) + len(t.ids) for t in trajectories)
    print(f"{len(episodes)} episodes, {turns} turns scored, {tokens:,} tokens in all")
    engine = statistics.median(times["engine"])
    for name, values in times.items():
        seconds = statistics.median(values)
        print(
            f"{name:10s} {seconds:7.2f} s  {seconds / engine:5.2f}x engine's  (reads about {read[name]:,} "
            f"tokens; largest difference of a probability from the rows': {difference[name]:.1e})"
        )


if __name__ == "__main__":
    main()
