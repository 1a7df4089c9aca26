"""`searchgym sweep --config`: one GRPO run per cost weight with a tiny random model, then the
trained policies evaluated and their front plotted."""

import json

import yaml

from searchgym.cli import main

ENV_ID = "searchgym/FictionalQA-Planner-v0"


def test_training_mode_trains_one_policy_per_weight(tiny_llama_dir, tmp_path, capsys):
    config = {
        "model": str(tiny_llama_dir),
        "env": ENV_ID,
        "env_kwargs": {"n_passages": 300, "max_obs_tokens": 64},
        "run_dir": str(tmp_path / "unused"),
        "steps": 1,
        "tasks_per_step": 2,
        "group_size": 2,
        "max_turns": 2,
        "max_new_tokens": 8,
        "micro_batch_size": 4,
        "eval_tasks": 0,
        "tensorboard": False,
        "rewards": {"format": 0.1},
    }
    path = tmp_path / "planner.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "sweep"
    argv = [
        "sweep",
        "--config",
        str(path),
        "--weights",
        "0.1,0",
        "--n",
        "2",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main([*argv, "--set", "lr=0.001", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mode"] == "train" and report["n"] == 2
    assert list(report["agents"]) == ["λ=0", "λ=0.1"]
    for weight in (0.0, 0.1):
        run_dir = out / f"lambda-{weight:g}"
        saved = json.loads((run_dir / "config.json").read_text())
        assert saved["rewards"] == {"format": 0.1, "per_search": weight} and saved["lr"] == 0.001
        agent = report["agents"][f"λ={weight:g}"]
        assert agent["trained_at"] == weight and agent["checkpoint"].endswith("checkpoints/step-000001")
        assert (run_dir / "sweep-eval").is_dir()
    assert [row["lambda"] for row in report["weights"]] == [0.0, 0.1]
    assert (out / "sweep.json").is_file() and (out / "pareto.png").read_bytes()[:4] == b"\x89PNG"
