"""The openai-client agent (``openai_agent.py``), unchanged, evaluated and trained from the CLI:
weights change, the env's reward terms are logged, episodes are saved for the viewer, dynamic
sampling refills and a run resumes, as for searchgym's own agents."""

import json
from pathlib import Path

import pytest
import torch
import yaml

from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.metrics_log import read_metrics
from searchgym.cli import main
from searchgym.errors import ConfigError

PROGRAM = f"{Path(__file__).parent / 'openai_agent.py'}:run"
ENV_KWARGS = {"n_passages": 300, "max_obs_tokens": 300}


def config(tiny_llama_dir, path, **overrides):
    """A tiny run. A random model never answers right: the cost of the tokens its searches read
    (its queries differ) makes the rewards of a group differ."""
    values = {
        "model": str(tiny_llama_dir),
        "env_kwargs": ENV_KWARGS,
        "rewards": {"per_1k_obs_tokens": 1.0},
        "steps": 2,
        "tasks_per_step": 2,
        "group_size": 2,
        "max_turns": 3,
        "max_new_tokens": 8,
        "lr": 1e-3,
        "eval_tasks": 2,
        "checkpoint_every": 1,
        "tensorboard": False,
    } | overrides
    path.write_text(yaml.safe_dump(values))
    return path


def weights(run_dir, step):
    from safetensors.torch import load_file

    return load_file(run_dir / "checkpoints" / f"step-{step:06d}" / "model.safetensors")


def test_train_program_from_the_cli_changes_weights_logs_rewards_and_saves_episodes(tiny_llama_dir, tmp_path):
    cfg, run = config(tiny_llama_dir, tmp_path / "c.yaml", dynamic_sampling=True), tmp_path / "run"
    assert (
        main(["train", "--config", str(cfg), "--program", PROGRAM, "--run-dir", str(run), "--no-progress"])
        == 0
    )
    start, end = weights(run, 0), weights(run, 2)
    assert any(not torch.equal(start[k], end[k]) for k in start)
    steps = [r for r in read_metrics(run) if "loss/policy" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for row in steps:
        assert {
            "reward/total",
            "reward/obs_tokens_1k",
            "reward/search_calls",
            "rollout/response_tokens",
        } <= set(row)
        assert row["rollout/searches"] == 1.0 and row["rollout/response_tokens"] > 8  # two calls, one stream
    saved = [json.loads(line) for line in (run / "episodes" / "step-000002.jsonl").open()]
    assert saved and all(row["error"] is None and row["turns"] for row in saved)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["eval_before"]["n"] == 2 and summary["eval_after"]["searches"] == 1.0

    more = config(tiny_llama_dir, tmp_path / "more.yaml", steps=3)
    assert (
        main(
            [
                "train",
                "--config",
                str(more),
                "--program",
                PROGRAM,
                "--run-dir",
                str(run),
                "--resume",
                "--no-progress",
            ]
        )
        == 0
    )
    assert json.loads((run / "summary.json").read_text())["resumed_from"] == 2
    assert [r["step"] for r in read_metrics(run) if "loss/policy" in r] == [1, 2, 3]


def test_eval_program_from_the_cli(tiny_llama_dir, tmp_path, capsys):
    args = ["eval", "--program", PROGRAM, "--agent", f"hf:{tiny_llama_dir}", "--n", "3", "--no-progress"]
    assert main([*args, "-E", "n_passages=300", "--out", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (name,) = report["agents"]
    assert name == PROGRAM and report["agents"][name]["all"]["searches"] == 1.0
    (episodes,) = tmp_path.glob("*.jsonl")
    rows = [json.loads(line) for line in episodes.open()]
    assert len(rows) == 3 and all(row["prediction"] is not None and row["error"] is None for row in rows)


def test_eval_program_needs_one_policy(tmp_path, capsys):
    assert main(["eval", "--program", PROGRAM, "--agent", "oracle", "--out", str(tmp_path)]) == 2
    assert "--program sends its model calls to one policy" in capsys.readouterr().err


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"rewards": {"terms": {"info_gain": 1.0}}},
            r"the trainer's reward terms \(info_gain\) read searchgym's own prompts",
        ),
        ({"advantage": "igpo"}, "advantage: igpo read searchgym's own prompts"),
        ({"guide": "oracle"}, "guide read searchgym's own prompts"),
        ({"program": "nowhere_module:run"}, "cannot import the program's module"),
        ({"program_time_limit_s": 0}, "program_time_limit_s must be > 0"),
    ],
)
def test_program_configs_that_cannot_work_fail_before_anything_loads(overrides, message):
    with pytest.raises(ConfigError, match=message):
        GRPOConfig(**({"program": PROGRAM} | overrides))
