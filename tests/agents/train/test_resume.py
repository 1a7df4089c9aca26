"""`train(cfg)` with ``resume``: from the newest intact checkpoint, and not at all once finished."""

import dataclasses
import logging

import pytest
import torch
import yaml
from train_config import tiny_config, weights

from searchgym.agents.train import grpo
from searchgym.agents.train.grpo import train
from searchgym.agents.train.metrics_log import read_metrics
from searchgym.cli import main
from searchgym.errors import ConfigError


def test_a_truncated_latest_checkpoint_resumes_from_the_previous_intact_one(tiny_llama_dir, tmp_path, caplog):
    train(tiny_config(tiny_llama_dir, tmp_path, eval_tasks=0))
    expected = {k: v.clone() for k, v in weights(tmp_path, 2).items()}  # not the mmap of the file cut below
    latest = tmp_path / "checkpoints" / "step-000002" / "model.safetensors"
    size = latest.stat().st_size
    with open(latest, "r+b") as f:  # a copy or a disk that gave out mid-file
        f.truncate(size // 2)

    with caplog.at_level(logging.WARNING):
        summary = train(tiny_config(tiny_llama_dir, tmp_path, eval_tasks=0, resume=True))

    assert summary["resumed_from"] == 1
    skipped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipping checkpoint")]
    assert len(skipped) == 1
    assert skipped[0].endswith(
        f"step-000002: model.safetensors is {size // 2} bytes, not {size} (truncated or altered)"
    )
    again = weights(tmp_path, 2)  # step 2 played again from step 1: the same update, exactly
    assert all(torch.equal(expected[k], again[k]) for k in expected)
    assert [r["step"] for r in read_metrics(tmp_path) if "loss/policy" in r] == [1, 2]


def test_resume_with_no_intact_checkpoint_says_so(tiny_llama_dir, tmp_path, caplog):
    broken = tmp_path / "checkpoints" / "step-000001"
    broken.mkdir(parents=True)
    (broken / "state.json").write_text('{"step": 1, "files": {"model.safetensors": 100}}')
    with (
        caplog.at_level(logging.WARNING),
        pytest.raises(ConfigError, match="no checkpoint in .* is complete and intact"),
    ):
        train(tiny_config(tiny_llama_dir, tmp_path, resume=True))
    assert "step-000001: model.safetensors is missing" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "checkpoints"]


def test_resuming_a_finished_run_changes_nothing(tiny_llama_dir, tmp_path, monkeypatch, capsys):
    summary = train(tiny_config(tiny_llama_dir, tmp_path, steps=1))
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file() and p.name != ".lock")
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}
    capsys.readouterr()

    def no_model(*args, **kwargs):
        raise AssertionError("a finished run loaded its model again")

    monkeypatch.setattr(grpo, "load_policies", no_model)
    resumed = train(tiny_config(tiny_llama_dir, tmp_path, steps=1, resume=True))

    assert "already finished at step 1" in capsys.readouterr().out
    assert resumed["resumed_from"] == 1 and resumed["eval_after"] == summary["eval_after"]
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file() and p.name != ".lock") == files
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files} == before  # metrics.jsonl too
    capsys.readouterr()

    # the same from the command line: no plots redrawn, no timing printed
    config = tmp_path.parent / f"{tmp_path.name}.yaml"
    config.write_text(yaml.safe_dump(dataclasses.asdict(tiny_config(tiny_llama_dir, tmp_path, steps=1))))
    assert main(["train", "--config", str(config), "--resume", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "already finished at step 1" in out and "steps in" not in out
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files} == before
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file() and p.name != ".lock") == files


def test_the_learning_rate_is_the_configs_at_every_step_even_resumed(tiny_llama_dir, tmp_path):
    """``lr_warmup_steps`` raises the rate step by step; a run resumed with another ``lr`` (``--set
    lr=... --set resume=true``, as a study resumes one run's warm start under other settings) steps
    at that rate, not at the one its saved optimizer held."""
    train(tiny_config(tiny_llama_dir, tmp_path, steps=1, eval_tasks=0, lr=1e-3, lr_warmup_steps=1))
    resumed = tiny_config(tiny_llama_dir, tmp_path, steps=2, eval_tasks=0, lr=3e-4, lr_warmup_steps=1)
    train(dataclasses.replace(resumed, resume=True))
    rates = [r["loss/lr"] for r in read_metrics(tmp_path) if "loss/lr" in r]
    assert rates == [5e-4, 3e-4]
