"""The README's quick try stays quick: `configs/quicktry.yaml` plays no more episodes than the
runs behind its measured time (docs/results.md#quick-try: 7.5-8 min with SmolLM2 on 2 idle cores,
200 and 184 GRPO episodes), so that a change to the config that would make it slow fails here. It
runs on the tests' tiny random model, which never answers right: every group is degenerate and
dynamic sampling refills as much as the config lets it, the quick try's most work."""

from pathlib import Path

import pytest

from searchgym.agents.train.config import load_config
from searchgym.agents.train.grpo import train
from searchgym.agents.train.metrics_log import read_metrics

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "quicktry.yaml"
MEASURED_MINUTES = 8.1
"""The slower of the two measured SmolLM2 runs (seed 0: 8 min 3 s, 200 GRPO episodes)."""
MINUTES_PER_GRPO_EPISODE = 3.0 / 200  # 8 steps of about 25 s played 200 episodes
BUDGET_MINUTES = 10.0


@pytest.mark.slow
def test_the_quick_try_plays_at_most_what_fits_in_ten_minutes(tiny_llama_dir, tmp_path):
    cfg = load_config(
        CONFIG,
        [
            f"model={tiny_llama_dir}",
            "policy=hf",
            "policy_kwargs={}",
            "trainable_layers=0",  # the tiny model has 2 blocks
            f"run_dir={tmp_path / 'run'}",
            "progress=false",
        ],
    )
    summary = train(cfg)
    rows = read_metrics(tmp_path / "run")
    played = sum(row["rollout/groups_played"] for row in rows if "rollout/groups_played" in row)
    episodes = int(played) * cfg.group_size
    most = cfg.steps * cfg.tasks_per_step * cfg.group_size * (1 + cfg.max_refill_rounds)
    assert 0 < episodes <= most  # the refills stop at max_refill_rounds, however degenerate the groups
    assert summary["eval_before"]["n"] == summary["eval_after"]["n"] == cfg.eval_tasks == 200
    # the measured run's warm start and evaluations are in MEASURED_MINUTES; more GRPO episodes
    # than it played are priced at its rate, and the most the config may play fits in ten minutes
    assert cfg.warm_start_episodes <= 16 and cfg.eval_tasks <= 200
    extra = (most - 200) * MINUTES_PER_GRPO_EPISODE
    assert MEASURED_MINUTES + extra <= BUDGET_MINUTES, (
        f"{most} GRPO episodes at most: {MEASURED_MINUTES + extra:.1f} min"
    )
