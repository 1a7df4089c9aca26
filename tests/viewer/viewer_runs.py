"""Run directories for the viewer's tests: a training run and a sweep written by hand, and an
episode whose text tries to inject markup."""

from __future__ import annotations

import json
import math
from pathlib import Path

from searchgym.agents import Episode, Turn
from searchgym.agents.train.metrics_log import MetricsLog

INJECTION = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def train_episode(step: int, group: int, task: int) -> Episode:
    """Episode of task ``task`` at ``step``: early steps search once and fail, later ones search
    twice (finding the gold document) and answer right."""
    good = step >= 3
    docs = ["d-gold", "d-other"] if good else ["d-other", "d-more"]
    observation = "\n".join(f"Doc {k}(Title: T{d} (x)) text of {d}" for k, d in enumerate(docs, 1))
    search = Turn(
        f"<think>step {step}</think>\n<search> q{task} {'two' if good else 'one'} </search>",
        f"\n\n<information>{observation}</information>\n\n",
        -0.1,
        "search",
        None,
        {"outcome": 0.0, "cost": -0.1, "info_gain": 0.2 if good else 0.0},
        obs_tokens=40,
        query=f"q{task}",
        doc_ids=docs,
    )
    invalid = Turn("<serch> typo", "Your action was invalid.", 0.0, None, "no <search> or <answer> tag", {})
    answer = Turn(
        f"<answer> {'gold' if good else 'wrong'} </answer>",
        "",
        float(good),
        "answer",
        None,
        {"outcome": float(good), "cost": 0.0},
    )
    turns = [search, answer] if good else [search, invalid, answer]
    return Episode(
        f"task-{task}",
        f"Question {task}?",
        ["gold"],
        {"hops": 1 + task % 2},
        turns,
        "gold" if good else "wrong",
        em=float(good),
        f1=float(good),
        n_searches=1,
        n_invalid=0 if good else 1,
        obs_tokens=40,
        total_reward=float(good) - 0.1,
        reward_components={"outcome": float(good), "cost": -0.1},
        terminated=True,
        evidence=["d-gold"],
    )


TRAIN_CONFIG = {"env": "searchgym/FictionalQA-BM25-v0", "env_kwargs": {"hops": [2]}, "train_split": "train",
                "eval_split": "dev", "max_turns": 4, "rewards": {}, "steps": 4}  # fmt: skip
"""The part of a GRPOConfig (config.json) that names the env."""


def train_metrics(step: int, steps: int = 4) -> dict[str, float]:
    """The metrics.jsonl line the trainer writes at ``step``."""
    metrics = {
        "reward/total": step / steps,
        "reward/outcome": step / steps,
        "reward/cost": -0.1,
        "rollout/em": step / steps,
        "rollout/searches": 1.0 + step / steps,
        "rollout/invalid_rate": 1 / (step + 1),
        "rollout/degenerate_groups": 0.5 / step,
        "loss/entropy": 1.0 / step,
        "loss/kl": 0.01 * step if step != 2 else math.nan,
        "time/step_s": 1.5,
    }
    if step % 2 == 0:
        metrics |= {"eval/em": step / steps, "eval/em_low": step / steps - 0.1, "eval/em_high": 1.0}
    return metrics


def write_step(run_dir: Path, step: int, groups: int = 2, tasks: int = 3) -> Path:
    """episodes/step-NNNNNN.jsonl as the trainer saves it: each row an Episode.to_dict() plus
    "step" and "group"."""
    folder = run_dir / "episodes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step-{step:06d}.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for group in range(groups):
            for task in range(tasks):
                row = {**train_episode(step, group, task).to_dict(), "step": step, "group": group}
                f.write(json.dumps(row) + "\n")
    return path


def write_train_run(run_dir: Path, steps: int = 4, groups: int = 2, tasks: int = 3) -> Path:
    """config.json, metrics.jsonl (with dev EM intervals) and episodes/step-NNNNNN.jsonl as the
    trainer writes them."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(TRAIN_CONFIG), encoding="utf-8")
    with MetricsLog(run_dir, tensorboard=False) as log:
        for step in range(1, steps + 1):
            log.log(step, train_metrics(step, steps))
    for step in range(1, steps + 1):
        write_step(run_dir, step, groups, tasks)
    return run_dir


def injection_episode() -> Episode:
    """An episode whose question, action, documents and answer carry markup and script."""
    observation = (
        f"Doc 1(Title: Evil {INJECTION}) A document containing {INJECTION} as text.\nDoc 2(Title: Fine) ok"
    )
    turns = [
        Turn(
            f"<search> {INJECTION} </search>",
            f"\n\n<information>{observation}</information>\n\n",
            0.0,
            "search",
            None,
            {"outcome": 0.0},
            obs_tokens=30,
            query=INJECTION,
            doc_ids=["evil", "fine"],
        ),
        Turn(f"<answer> {INJECTION} </answer>", "", 0.0, "answer", None, {"outcome": 0.0}),
    ]
    return Episode(
        "evil-1",
        f"Who wrote {INJECTION}?",
        [INJECTION],
        {"hops": 1},
        turns,
        INJECTION,
        n_searches=1,
        obs_tokens=30,
        terminated=True,
        evidence=["evil"],
        error=f"the program raised ValueError: {INJECTION}",  # an agent program's error, shown as text
    )


def write_injection_run(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "evil.jsonl").write_text(json.dumps(injection_episode().to_dict()) + "\n", encoding="utf-8")
    (out / "metrics.json").write_text(
        json.dumps({"env": INJECTION, "agents": {"evil": {}}}), encoding="utf-8"
    )
    return out


def write_sweep(out: Path, episodes_from: Path) -> Path:
    """sweep.json for two agents whose episodes are copied from an eval directory."""
    out.mkdir(parents=True, exist_ok=True)
    agents = {}
    for name, accuracy, searches in (("oracle", 1.0, 2.5), ("heuristic", 0.2, 1.0)):
        (out / f"{name}.jsonl").write_bytes((episodes_from / f"{name}.jsonl").read_bytes())
        agents[name] = {
            "accuracy": accuracy,
            "f1": accuracy,
            "searches": searches,
            "turns": searches + 1,
            "reward": accuracy,
            "pareto": True,
        }
    weights = [{"lambda": 0.0, "best": "oracle"}, {"lambda": 0.5, "best": "heuristic"}]
    report = {
        "mode": "evaluate",
        "env": "searchgym/FictionalQA-BM25-v0",
        "n": 6,
        "agents": agents,
        "front": ["heuristic", "oracle"],
        "weights": weights,
    }
    (out / "sweep.json").write_text(json.dumps(report), encoding="utf-8")
    return out


def _nested(depth: int) -> bytes:
    return b'{"task_id": "deep", "turns": [], "metadata": {"x": ' + b"[" * depth + b"]" * depth + b"}}"


def _with(row: dict, **changes) -> bytes:
    return json.dumps({**row, **changes}).encode()


def _turn(row: dict, **changes) -> bytes:
    """``row`` with ``changes`` made to its first turn."""
    return _with(row, turns=[{**row["turns"][0], **changes}, *row["turns"][1:]])


def _question(row: dict, text: bytes) -> bytes:
    """``row`` with the question written as ``text`` (raw bytes in the JSON string)."""
    return _with(row, question="Q?").replace(b'"Q?"', b'"' + text + b'"')


def _digits(row: dict, n: int) -> bytes:
    return _with(row, n_searches=1).replace(b'"n_searches": 1', b'"n_searches": ' + b"9" * n)


MALFORMED = {  # name -> (the line made from a good episode row, what the viewer says of it)
    "not JSON": (lambda row: b'{"task_id": "x", oops}', "not JSON (Expecting"),
    "a JSON list": (lambda row: b"[1, 2, 3]", "a list, not a JSON object"),
    "a JSON string": (lambda row: b'"an episode"', "a string, not a JSON object"),
    "no turns": (lambda row: b'{"task_id": "x", "question": "Q?"}', "no turns: not an episode"),
    "turns a number": (lambda row: _with(row, turns=5), "turns is a number, not a list"),
    "a turn a number": (
        lambda row: _with(row, turns=[row["turns"][0], 5]),
        "turn 2 is a number, not an object",
    ),
    "an action a number": (lambda row: _turn(row, action=7), "turn 1's action is a number"),
    "doc_ids a string": (lambda row: _turn(row, doc_ids="d1"), "turn 1's doc_ids is a string, not a list"),
    "question an object": (lambda row: _with(row, question={"q": 1}), "question is an object, not a string"),
    "answers a string": (lambda row: _with(row, answers="gold"), "answers is a string, not a list"),
    "em a string": (lambda row: _with(row, em="1.0"), "em is a string, not a number"),
    "em true": (lambda row: _with(row, em=True), "em is true or false, not a number"),
    "hops a list": (lambda row: _with(row, metadata={"hops": [2]}), "metadata.hops is a list, not a number"),
    "nested 40 deep": (lambda row: _nested(40), "nested deeper than 32 levels"),
    "nested 100,000 deep": (lambda row: _nested(100_000), "nested deeper than 32 levels"),
    "invalid UTF-8": (lambda row: _question(row, b"Q\xff?"), "not UTF-8 text (byte 0xff"),
    "a lone surrogate": (lambda row: _question(row, b"Q\\ud800?"), "half of a UTF-16 surrogate pair"),
    "a 5,000-digit integer": (lambda row: _digits(row, 5000), "a number of more than 4300 digits"),
    "a 400-digit em": (lambda row: _with(row, em=int("9" * 400)), "em is a number of 400 digits, too large"),
    "an oversized line": (
        lambda row: _with(row, question="x" * (16 << 20)),
        "bytes long, more than the 16 MiB a line may have",
    ),
}
"""Every kind of malformed line the viewer skips and counts."""


def write_broken_run(out: Path, good_rows: list[dict], bad_lines: list[bytes]) -> Path:
    """An eval directory "out" whose oracle.jsonl holds ``good_rows`` with ``bad_lines`` after
    the second of them (so the first malformed line is line 3)."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r).encode() for r in good_rows]
    lines[2:2] = bad_lines
    (out / "oracle.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    metrics = {
        "env": "searchgym/FictionalQA-BM25-v0",
        "agents": {"oracle": {"all": {"em_low": 0.1, "em_high": 0.9}}},
    }
    (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    return out
