"""`train(cfg)` end to end on a tiny random Llama and a small generated world."""

import dataclasses
import json
from types import SimpleNamespace

import gymnasium as gym
import pytest
import torch
from safetensors.torch import load_file
from train_config import tiny_config, weights

from searchgym.agents.policies.agent import Trajectory
from searchgym.agents.policies.base import check_trainable
from searchgym.agents.policies.hf import HFPolicy
from searchgym.agents.train import grpo
from searchgym.agents.train.grpo import train
from searchgym.agents.train.metrics_log import read_metrics
from searchgym.errors import ConfigError, TrainingDiverged


def test_training_changes_the_parameters_and_logs_finite_metrics(tiny_llama_dir, tmp_path):
    summary = train(tiny_config(tiny_llama_dir, tmp_path))
    start, end = weights(tmp_path, 0), weights(tmp_path, 2)
    assert any(not torch.equal(start[k], end[k]) for k in start)
    rows = read_metrics(tmp_path)
    steps = [r for r in rows if "loss/policy" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for row in steps:
        assert all(torch.isfinite(torch.tensor(float(v))) for v in row.values())
        assert 0 <= row["loss/clip_fraction"] <= 1 and row["rollout/response_tokens"] > 0
        assert {
            "reward/total",
            "reward/outcome",
            "reward/search_calls",
            "rollout/searches",
            "loss/entropy",
        } <= set(row)
        parts = row["time/rollout_s"] + row["time/score_s"] + row["time/update_s"]
        assert 0 < parts <= row["time/step_s"] + 1e-6  # where the step's time went
    assert summary["eval_before"]["n"] == 2 and summary["eval_after"]["n"] == 2
    before, after = summary["eval_before"], summary["eval_after"]
    assert before["em_low"] <= before["em"] <= before["em_high"] and len(after["em_per_task"]) == 2
    for result in (before, after):  # the retrieval card: a kind for every failed dev episode
        failed = sum(em < 1 for em in result["em_per_task"])
        assert (
            result["failures"]["failed"]
            == failed
            == sum(k["count"] for k in result["failures"]["kinds"].values())
        )
    evaluations = [r for r in rows if "eval/em" in r]
    assert all(r["eval/gold_shown"] == r["eval/gold_shown"] for r in evaluations)  # logged, not NaN
    failure_shares = [v for k, v in evaluations[-1].items() if k.startswith("eval/failure/")]
    assert sum(failure_shares) == pytest.approx(1 - after["em"])
    diff = summary["grpo_vs_start"]
    assert diff["em_diff"] == after["em"] - before["em"] and diff["em_diff_low"] <= diff["em_diff"]
    assert json.loads((tmp_path / "summary.json").read_text())["steps"] == 2
    saved = [json.loads(line) for line in (tmp_path / "episodes" / "step-000002.jsonl").open()]
    assert len(saved) == 4 and {row["step"] for row in saved} == {2}  # log_episodes, for searchgym view
    assert {row["group"] for row in saved} == {0, 1} and all(row["turns"] for row in saved)


def test_a_killed_run_resumes_to_the_same_parameters(tiny_llama_dir, tmp_path, monkeypatch):
    whole = tmp_path / "whole"
    train(tiny_config(tiny_llama_dir, whole, steps=3, checkpoint_every=2, eval_tasks=0))

    killed = tmp_path / "killed"
    real_update, calls = grpo.update, []

    def dies_in_step_three(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # killed mid-step, after the checkpoint of step 2
        return real_update(*args, **kwargs)

    monkeypatch.setattr(grpo, "update", dies_in_step_three)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_config(tiny_llama_dir, killed, steps=3, checkpoint_every=2, eval_tasks=0))
    monkeypatch.setattr(grpo, "update", real_update)
    summary = train(
        tiny_config(tiny_llama_dir, killed, steps=3, checkpoint_every=2, eval_tasks=0, resume=True)
    )

    assert summary["resumed_from"] == 2
    a, b = weights(whole, 3), weights(killed, 3)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["step"] for r in read_metrics(killed) if "loss/policy" in r] == [1, 2, 3]


def test_the_kl_reference_is_the_warm_started_policy_also_after_a_resume(
    tiny_llama_dir, tmp_path, monkeypatch
):
    def config(run_dir, **overrides):
        return tiny_config(
            tiny_llama_dir,
            run_dir,
            warm_start_episodes=2,
            warm_start_batch_size=2,
            kl_coef=0.5,
            keep_checkpoints=1,
            eval_tasks=0,
            **overrides,
        )

    whole = tmp_path / "whole"
    train(config(whole))
    first = next(r for r in read_metrics(whole) if r["step"] == 1)
    assert first["loss/kl"] == 0.0  # the first update starts at the reference: SFT'd, not as loaded
    assert sorted(p.name for p in (whole / "checkpoints").iterdir()) == ["step-000000", "step-000002"]

    killed = tmp_path / "killed"
    real_update, calls = grpo.update, []

    def dies_in_step_two(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_update(*args, **kwargs)

    monkeypatch.setattr(grpo, "update", dies_in_step_two)
    with pytest.raises(KeyboardInterrupt):
        train(config(killed))
    monkeypatch.setattr(grpo, "update", real_update)
    assert train(config(killed, resume=True))["resumed_from"] == 1  # the reference: step 0 on disk
    a, b = weights(whole, 2), weights(killed, 2)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_non_finite_loss_stops_with_a_clear_error_and_keeps_the_last_checkpoint(
    tiny_llama_dir, tmp_path, monkeypatch
):
    from searchgym.agents.train import update

    real_loss = update.policy_loss

    def nan_loss(*args, **kwargs):
        loss, stats = real_loss(*args, **kwargs)
        return loss * float("nan"), stats

    monkeypatch.setattr(update, "policy_loss", nan_loss)
    with pytest.raises(TrainingDiverged, match="not finite.*last good checkpoint"):
        train(tiny_config(tiny_llama_dir, tmp_path, eval_tasks=0))
    start = weights(tmp_path, 0)
    assert start and not (tmp_path / "checkpoints" / "step-000001").exists()


def test_a_warm_start_runs_before_grpo_and_is_evaluated_on_both_sides(tiny_llama_dir, tmp_path):
    summary = train(
        tiny_config(tiny_llama_dir, tmp_path, steps=1, warm_start_episodes=2, warm_start_batch_size=2)
    )
    loaded = load_file(tiny_llama_dir / "model.safetensors")
    warm = weights(tmp_path, 0)  # step 0: after the warm start, before any GRPO update
    assert any(not torch.equal(loaded[k], warm[k]) for k in warm)
    assert summary["eval_base"]["n"] == summary["eval_before"]["n"] == summary["eval_after"]["n"] == 2
    phases = summary["phase_s"]  # where the wall time went, each phase once
    assert set(phases) == {"eval_base", "warm_start", "eval_before", "grpo_steps", "eval_after"}
    assert all(s > 0 for s in phases.values()) and sum(phases.values()) <= summary["wall_s"]
    resumed = train(
        tiny_config(
            tiny_llama_dir, tmp_path, steps=1, warm_start_episodes=2, warm_start_batch_size=2, resume=True
        )
    )
    assert (
        resumed["resumed_from"] == 1 and resumed["eval_base"] == summary["eval_base"]
    )  # kept in the checkpoint


def test_a_warm_start_alone_is_saved_with_the_chat_template_it_trained_with(tiny_llama_dir, tmp_path):
    """``steps: 0`` with ``chat_template``: the warm start, evaluated once, saved as step 0 with
    the template on its tokenizer (what ``trl_model`` hands to trl)."""
    from transformers import AutoTokenizer

    from searchgym.agents.integrations.trl import trl_model
    from searchgym.agents.policies.models import resolve_chat_template

    cfg = tiny_config(
        tiny_llama_dir,
        tmp_path,
        steps=0,
        chat_template="qwen2_5",
        env_kwargs={"n_passages": 300, "max_obs_tokens": 64, "protocol": "tool_calls"},
        warm_start_episodes=2,
        warm_start_batch_size=2,
    )
    summary = train(cfg)
    assert summary["eval_before"]["n"] == 2 and summary["eval_after"] is None  # no GRPO step: no second eval
    assert summary["grpo_vs_start"] is None
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-000000"]
    assert trl_model(tmp_path) == str(tmp_path / "checkpoints" / "step-000000")
    saved = AutoTokenizer.from_pretrained(trl_model(tmp_path))
    assert saved.chat_template == resolve_chat_template("qwen2_5")  # exactly: trl recognises it by its text
    loaded = load_file(tiny_llama_dir / "model.safetensors")
    assert any(not torch.equal(loaded[k], v) for k, v in weights(tmp_path, 0).items())


def test_grpo_does_not_replay_the_questions_the_warm_start_imitated(tiny_llama_dir, tmp_path, monkeypatch):
    from searchgym.agents.train import play as train_play
    from searchgym.agents.train import warm_start

    seen: dict[str, set[str]] = {"sft": set(), "grpo": set()}
    record_sft, play = warm_start.oracle_trajectories, train_play.play_groups

    def recorded_sft(envs, tasks, *args, **kwargs):
        seen["sft"] |= {t.id for t in tasks}
        return record_sft(envs, tasks, *args, **kwargs)

    def recorded_play(engine, envs, tasks, *args, **kwargs):
        seen["grpo"] |= {t.id for t in tasks}
        return play(engine, envs, tasks, *args, **kwargs)

    monkeypatch.setattr(warm_start, "oracle_trajectories", recorded_sft)
    monkeypatch.setattr(train_play, "play_groups", recorded_play)
    cfg = tiny_config(tiny_llama_dir, tmp_path, steps=2, warm_start_episodes=4, warm_start_batch_size=4)
    train(cfg)
    assert len(seen["sft"]) == 4 and len(seen["grpo"]) == 2 * cfg.tasks_per_step
    assert not seen["sft"] & seen["grpo"]


def test_information_gain_joins_the_reward_and_each_turn(monkeypatch):
    """score_groups adds weight x the summed gains to each episode's reward (not with igpo, which
    uses them per turn) and records each turn's gain among the turn's components for the viewer."""

    from searchgym.agents.play.episode import Episode, Turn
    from searchgym.agents.train import rewards
    from searchgym.agents.train.config import GRPOConfig
    from searchgym.agents.train.rewards import Scorer
    from searchgym.envs.rubric import Rubric, Term

    def episode(reward):
        turns = [Turn("a", "o", 0.0, "search", None), Turn("b", "o", reward, "answer", None)]
        trajectory = Trajectory([1], [2, 3], [1, 1], [0.0, 0.0], turn_ends=[1, 2], turn_starts=[0, 1])
        return Episode("t", "q", ["a"], {}, turns, total_reward=reward, trajectory=trajectory)

    groups = [[episode(1.0), episode(0.0)]]
    monkeypatch.setattr(rewards, "info_gain", lambda flat, scorer: [[0.5], [0.25]])
    cfg = GRPOConfig(rewards={"terms": {"info_gain": 2.0}})
    env = SimpleNamespace(unwrapped=SimpleNamespace(rubric=Rubric((Term("outcome", 1.0),))))
    rubric = grpo.training_rubric(env, cfg)  # the env's terms, and the trainer's with cfg's weight
    assert rubric.weights(("step", "trainer")) == {"outcome": 1.0, "info_gain": 2.0}
    samples, metrics = rewards.score_groups(groups, rubric, cfg, Scorer(None, None, None))
    # an env of yours without a rubric: its reward is its own, its components logged by name
    own = grpo.training_rubric(SimpleNamespace(unwrapped=SimpleNamespace()), cfg)
    assert own.weights(("step", "episode", "trainer")) == {"info_gain": 2.0}
    groups[0][0].reward_components["found"] = 1.0
    assert rewards.score_groups(groups, own, cfg, Scorer(None, None, None))[1]["reward/found"] == 0.5
    assert [len(group) for group in samples] == [2]  # the groups stay groups
    assert metrics["reward/total"] == (1.0 + 2.0 * 0.5 + 0.0 + 2.0 * 0.25) / 2
    assert metrics["reward/info_gain"] == 0.375
    assert [t.reward_components for t in groups[0][0].turns] == [{"info_gain": 0.5}, {}]
    assert groups[0][1].reward_components == {"info_gain": 0.25}


def test_a_users_trainer_term_is_scored_beside_the_information_gain(monkeypatch):
    """A trainer term registered under any name gets the step's episodes and the scorer, and its
    weighted values join the reward (summed over turns), or each turn's reward under igpo."""
    import searchgym
    from searchgym.agents.play.episode import Episode, Turn
    from searchgym.agents.train import rewards
    from searchgym.agents.train.config import GRPOConfig
    from searchgym.agents.train.rewards import Scorer
    from searchgym.envs.rubric import Rubric, Term
    from searchgym.registry import TRAINER_REWARDS

    seen = []

    def searched_early(episodes, scorer):
        """1 for each search before the answer."""
        seen.append(scorer.model)
        return [[float(t.tool == "search") for t in ep.turns[:-1]] for ep in episodes]

    monkeypatch.setattr(TRAINER_REWARDS, "_specs", dict(TRAINER_REWARDS._specs))
    searchgym.register_reward("searched_early", searched_early, level="trainer")
    monkeypatch.setattr(rewards, "info_gain", lambda flat, scorer: [[0.5, 0.5], [0.25]])

    def episode(reward, tools):
        turns = [Turn(t, "o", 0.0, t, None) for t in tools] + [Turn("b", "o", reward, "answer", None)]
        n = len(turns)
        trajectory = Trajectory(
            [1], list(range(n)), [1] * n, [0.0] * n, list(range(1, n + 1)), list(range(n))
        )
        return Episode("t", "q", ["a"], {}, turns, total_reward=reward, trajectory=trajectory)

    env = SimpleNamespace(unwrapped=SimpleNamespace(rubric=Rubric((Term("outcome", 1.0),))))
    for advantage in ("grpo", "igpo"):
        groups = [[episode(1.0, ["search", "search"]), episode(0.0, ["search"])]]
        cfg = GRPOConfig(advantage=advantage, rewards={"terms": {"info_gain": 2.0, "searched_early": 0.5}})
        rubric = grpo.training_rubric(env, cfg)
        assert [(t.name, t.when) for t in rubric.at("trainer")] == [
            ("info_gain", "trainer"),
            ("searched_early", "trainer"),
        ]
        samples, metrics = rewards.score_groups(groups, rubric, cfg, Scorer("the model", None, None))
        assert seen[-1] == "the model"
        assert metrics["reward/searched_early"] == 1.5 and metrics["reward/info_gain"] == 0.625
        assert groups[0][0].turns[1].reward_components == {"info_gain": 0.5, "searched_early": 1.0}
        if advantage == "grpo":  # 1 + 2 x 1.0 + 0.5 x 2 against 0 + 2 x 0.25 + 0.5 x 1
            assert metrics["reward/total"] == (4.0 + 1.0) / 2
        else:  # each turn's reward: 2 x its gain + 0.5 x its search, then the outcome
            weighted = rewards.weighted_turns([(2.0, "info_gain", [[0.5, 0.5], [0.25]]),
                                               (0.5, "searched_early", [[1.0, 1.0], [1.0]])], 0)  # fmt: skip
            assert weighted == [1.5, 1.5]
    with pytest.raises(ConfigError, match="'searched_early' is a trainer term: it reads the policy"):
        searchgym.make(
            "searchgym/FictionalQA-BM25-v0", n_passages=300, rewards={"terms": {"searched_early": 1.0}}
        )
    with pytest.raises(ConfigError, match="already a trainer reward term"):
        searchgym.register_reward("searched_early", searched_early)


def test_dynamic_sampling_refills_degenerate_groups_with_new_tasks(monkeypatch):
    """Groups whose rewards are all equal are dropped and further tasks played, in bounded rounds;
    the extra tasks follow from the step, so a resumed run draws the same."""

    from searchgym.agents.policies.base import RolloutEngine
    from searchgym.agents.train import play, schedule
    from searchgym.agents.train.config import GRPOConfig

    # rewards of each group played, in order: step tasks (2 groups), then refills
    script = iter([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    played = []

    def play_groups(engine, envs, tasks, params, group_size, seed, on_turn=None):
        played.append([t for t in tasks])
        on_turn(len(tasks) * group_size)
        return [
            [
                SimpleNamespace(total_reward=r, trajectory=SimpleNamespace(prompt_ids=[t], ids=[r]))
                for r in next(script)
            ]
            for t in tasks
        ]

    monkeypatch.setattr(play, "play_groups", play_groups)
    accelerator = SimpleNamespace(process_index=0, num_processes=1)
    cfg = GRPOConfig(tasks_per_step=2, group_size=2, dynamic_sampling=True, max_refill_rounds=2)
    tasks = list(range(10))
    forgotten = []  # the CPU engine frees the kept streams of the groups the step drops

    class Engine(RolloutEngine):
        forget = staticmethod(forgotten.append)

    nothing = RolloutEngine()  # an engine that keeps nothing
    groups, metrics = play.play_step(Engine(), [None] * 4, tasks, 3, cfg, accelerator)
    assert [[ep.total_reward for ep in g] for g in groups] == [[0.0, 1.0], [1.0, 0.0]]
    assert forgotten == [[played[0][0], 1.0]] * 2 + [[played[1][0], 0.0]] * 2  # both degenerate groups
    assert metrics == {"rollout/degenerate_groups": 0.5, "rollout/groups_played": 4.0,
                       "rollout/groups_trained": 2.0, "rollout/short_groups": 0.0}  # fmt: skip
    assert [len(t) for t in played] == [2, 1, 1]  # one refill per round while a group was missing
    first, played[:] = list(played), []
    script = iter([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    play.play_step(nothing, [None] * 4, tasks, 3, cfg, accelerator)
    assert played == first  # the same tasks, refills included

    # bounded in time: past max_refill_seconds no refill round starts; the step trains on the one
    # informative group it found, says what it dropped, and shows its rounds as they are played
    timed = GRPOConfig(tasks_per_step=2, group_size=2, dynamic_sampling=True, max_refill_seconds=0.0)
    script, played[:], shown = iter([[1.0, 1.0], [0.0, 1.0]]), [], []
    groups, metrics = play.play_step(nothing, [None] * 4, tasks, 3, timed, accelerator, status=shown.append)
    assert [len(t) for t in played] == [2] and len(groups) == 1 and metrics["rollout/short_groups"] == 1.0
    assert shown == ["round 0: 2 groups, 4 turns"]
    assert grpo.short_step_note(4, metrics, timed, wanted=2) == (
        "step 4: dynamic sampling dropped 1 of 2 groups (all rewards equal) and found 1 of 2 informative "
        "groups within max_refill_rounds 3 / max_refill_seconds 0.0; it trains on 1"
    )
    script, played[:] = iter([[1.0, 1.0], [0.0, 0.0]]), []
    groups, metrics = play.play_step(nothing, [None] * 4, tasks, 3, timed, accelerator)
    assert len(groups) == 2 and metrics["rollout/short_groups"] == 2.0  # none informative: its own
    assert grpo.short_step_note(4, metrics, timed, wanted=2).endswith(
        "it trains on the step's own groups, which carry no gradient"
    )

    off = GRPOConfig(tasks_per_step=2, group_size=2)
    script = iter([[1.0, 1.0], [0.0, 1.0]])
    groups, metrics = play.play_step(nothing, [None] * 4, tasks, 3, off, accelerator)
    assert len(groups) == 2 and metrics["rollout/degenerate_groups"] == 0.5

    # oversample: the first round plays twice the step's tasks at once, here enough that no
    # refill round is needed; its own tasks come first, as without it
    over = GRPOConfig(tasks_per_step=2, group_size=2, dynamic_sampling=True, oversample=2.0)
    script, played[:] = iter([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0]]), []
    groups, metrics = play.play_step(nothing, [None] * 8, tasks, 3, over, accelerator)
    assert [len(t) for t in played] == [4] and played[0][:2] == first[0]
    assert [[ep.total_reward for ep in g] for g in groups] == [[0.0, 1.0], [1.0, 0.0]]
    assert metrics["rollout/groups_played"] == 4.0 and metrics["rollout/groups_trained"] == 2.0
    assert schedule.first_round_size(over, accelerator) == 4
    with pytest.raises(ConfigError, match="oversample must be >= 1"):
        GRPOConfig(oversample=0.5)
    with pytest.raises(ConfigError, match="oversample plays extra tasks for dynamic sampling"):
        GRPOConfig(oversample=2.0)


class CountingPolicy(HFPolicy):
    """A user's own trainable policy: HF generation that counts its calls."""

    calls = 0

    def generate(self, prompts, params):
        CountingPolicy.calls += 1
        return super().generate(prompts, params)


class ChatOnly:
    def __init__(self, model, **kwargs):
        self.name = model

    def chat(self, conversations, params):
        return []


def test_grpo_trains_any_registered_trainable_policy_and_refuses_others(tiny_llama_dir, tmp_path):
    from searchgym.registry import POLICIES

    POLICIES.register("test-counting", CountingPolicy, override=True)
    POLICIES.register("test-chat-only", ChatOnly, override=True)
    summary = train(
        tiny_config(tiny_llama_dir, tmp_path / "a", policy="test-counting", steps=1, eval_tasks=0)
    )
    assert summary["steps"] == 1 and CountingPolicy.calls > 0
    with pytest.raises(
        ConfigError, match="'test-chat-only' gave a ChatOnly, which GRPO cannot train: it lacks model"
    ):
        train(tiny_config(tiny_llama_dir, tmp_path / "b", policy="test-chat-only", steps=1, eval_tasks=0))
    with pytest.raises(ConfigError, match=r"lacks .*RolloutEngine as a base class \(its methods are no-ops"):
        check_trainable(Unengined(tiny_llama_dir), "mine")  # all a policy needs, but not an engine


class Unengined:
    """A trainable policy in all but its base class: the trainer calls `RolloutEngine`'s methods."""

    def __init__(self, model_dir):
        hf = HFPolicy(str(model_dir))
        self.name, self.model, self.tokenizer = "mine", hf.model, hf.tokenizer
        self.generate, self.chat, self.reseed = hf.generate, hf.chat, hf.reseed


def test_eval_base_false_skips_only_the_evaluation_as_loaded(tiny_llama_dir, tmp_path):
    summary = train(
        tiny_config(
            tiny_llama_dir, tmp_path, steps=1, warm_start_episodes=2, warm_start_batch_size=2, eval_base=False
        )
    )
    assert summary["eval_base"] is None
    assert summary["eval_before"]["n"] == summary["eval_after"]["n"] == 2


def test_int8_rollouts_train_with_truncated_importance_weights(tiny_llama_dir, tmp_path):
    """An int8 sampler with ``tis_cap``: the update's ratio is the model's to itself (1, nothing
    clipped) and the sampler's differences show as importance weights other than 1."""
    cfg = tiny_config(
        tiny_llama_dir, tmp_path, policy="cpu", policy_kwargs={"rollout_dtype": "int8"}, tis_cap=2.0,
        steps=1, eval_tasks=0, temperature=1.0,
    )  # fmt: skip
    train(cfg)
    (row,) = [r for r in read_metrics(tmp_path) if "loss/policy" in r]
    assert row["loss/ratio"] == pytest.approx(1.0) and row["loss/clip_fraction"] == 0.0
    assert 0 < row["loss/tis_weight"] <= 2.0 and row["loss/tis_weight"] != pytest.approx(1.0, abs=1e-4)


def test_the_cpu_engines_caches_serve_the_information_gain_then_are_freed(
    tiny_llama_dir, tmp_path, monkeypatch
):
    """The CPU engine's keys and values of a step's episodes spare the information gain a second
    read of them, and are freed before the update needs the memory (they belong to weights the
    update changes); an evaluation's are freed too, and it decodes with the float weights."""
    from searchgym.agents.policies.cached import CachedPolicy
    from searchgym.agents.train.evaluation import evaluate

    events = []  # in order: "hit" (a kept cache served the gain), "drop", "update (N kept)"
    cached_kv, drop, update = CachedPolicy.cached_kv, CachedPolicy.drop_caches, grpo.update
    engines = []

    def spying_cached_kv(self, ids, length):
        kept = cached_kv(self, ids, length)
        events.append("hit" if kept is not None else "miss")
        return kept

    def spying_drop(self):
        engines.append(self)
        events.append("drop")
        drop(self)

    def spying_update(*args, **kwargs):
        events.append(f"update ({len(engines[-1].store.entries)} kept)")
        return update(*args, **kwargs)

    monkeypatch.setattr(CachedPolicy, "cached_kv", spying_cached_kv)
    monkeypatch.setattr(CachedPolicy, "drop_caches", spying_drop)
    monkeypatch.setattr(grpo, "update", spying_update)
    cfg = tiny_config(tiny_llama_dir, tmp_path, policy="cpu", steps=1, eval_tasks=0)
    train(cfg)
    assert events == ["hit"] * 4 + ["drop", "update (0 kept)"]

    seen = []  # how many streams the engine kept after each of its calls
    policy = CachedPolicy(str(tiny_llama_dir), device="cpu", dtype="float32")
    generate = policy.generate

    def counting(*args, **kwargs):
        completions = generate(*args, **kwargs)
        seen.append(len(policy.store.entries))
        return completions

    policy.generate = counting
    evaluate(dataclasses.replace(cfg, eval_tasks=2), policy)
    assert max(seen) > 0 and policy.store.entries == []
    int8 = CachedPolicy(str(tiny_llama_dir), device="cpu", dtype="float32", rollout_dtype="int8")
    models, decode = [], int8._decode
    monkeypatch.setattr(int8, "_decode", lambda model, *args: models.append(model) or decode(model, *args))
    evaluate(dataclasses.replace(cfg, eval_tasks=2), int8)
    assert models and all(m is int8.model for m in models)  # the trained weights, not the int8 copy
    with pytest.raises(ConfigError, match="nothing to evaluate: eval_tasks is 0"):
        evaluate(cfg, policy)


def test_the_warm_start_steps_in_micro_batches_of_the_update(tiny_llama_dir, tmp_path, monkeypatch):
    """A step of ``warm_start_batch_size`` episodes, in micro-batches no larger than the update's."""
    import contextlib

    from transformers import AutoTokenizer

    from searchgym.agents.train import warm_start

    calls = []
    monkeypatch.setattr(warm_start, "sft", lambda model, trajectories, **kw: calls.append(kw) or [0.0])
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    for micro, expected in ((2, (2, 2)), (3, (1, 4)), (8, (4, 1))):
        cfg = tiny_config(
            tiny_llama_dir, tmp_path, warm_start_episodes=4, warm_start_batch_size=4, micro_batch_size=micro
        )
        warm_start.warm_start(cfg, None, tokenizer, SimpleNamespace(autocast=contextlib.nullcontext))
        assert (calls[-1]["batch_size"], calls[-1]["grad_accum"]) == expected  # 4 episodes a step


def test_a_bfloat16_warm_start_learns_as_a_float32_one(tiny_llama_dir, tmp_path):
    """Autocast keeps its bfloat16 copies of the weights until the outermost autocast exits: one
    context around the whole warm start made every step compute with the first step's weights
    (the main job's SFT loss stalled at 1.2 instead of reaching 0.05)."""
    import contextlib

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from searchgym.agents.train.warm_start import warm_start

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    cfg = tiny_config(
        tiny_llama_dir,
        tmp_path,
        warm_start_episodes=4,
        warm_start_batch_size=2,
        warm_start_epochs=4,
        warm_start_lr=1e-2,
        micro_batch_size=2,
    )
    losses = {}
    for name, autocast in (
        ("float32", contextlib.nullcontext),
        ("bfloat16", lambda: torch.autocast("cpu", dtype=torch.bfloat16)),
    ):
        model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)
        losses[name] = warm_start(cfg, model, tokenizer, SimpleNamespace(autocast=autocast))
    assert losses["float32"][-1] < 0.7 * losses["float32"][0]  # 14.6 -> 9.3 (before: 14.6 -> 13 in bfloat16)
    assert losses["bfloat16"][-1] == pytest.approx(losses["float32"][-1], rel=0.05)


@pytest.mark.parametrize("native", [True, False])
def test_bf16_auto_autocasts_only_where_the_cpu_computes_bfloat16_natively(
    tiny_llama_dir, tmp_path, monkeypatch, native
):
    """``bf16: auto`` (the quickstart's) runs anywhere; ``true`` is refused where it would be
    emulated, and the default keeps a CPU run in float32."""
    from searchgym.agents.policies import cached

    monkeypatch.setattr(cached, "bf16_supported", lambda: native)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert grpo._use_bf16(tiny_config(tiny_llama_dir, tmp_path, bf16="auto")) is native
    assert grpo._use_bf16(tiny_config(tiny_llama_dir, tmp_path)) is False
    if native:
        assert grpo._use_bf16(tiny_config(tiny_llama_dir, tmp_path, bf16=True)) is True
    else:
        with pytest.raises(ConfigError, match="set bf16: auto to use it only where there is"):
            grpo._use_bf16(tiny_config(tiny_llama_dir, tmp_path, bf16=True))


def test_trainable_layers_updates_only_the_top_blocks_after_a_full_warm_start(tiny_llama_dir, tmp_path):
    cfg = tiny_config(
        tiny_llama_dir, tmp_path, warm_start_episodes=2, warm_start_batch_size=2, trainable_layers=1
    )
    train(cfg)
    before, after = weights(tmp_path, 0), weights(tmp_path, 2)
    initial = load_file(tiny_llama_dir / "model.safetensors")
    changed = {k for k in after if not torch.equal(before[k], after[k])}
    # the warm start trained everything, embeddings and the first block included
    assert not torch.equal(initial["model.embed_tokens.weight"], before["model.embed_tokens.weight"])
    assert changed and all(k.startswith(("model.layers.1.", "model.norm.")) for k in changed)
    assert any(k.startswith("model.layers.1.") for k in changed)


def test_trainable_layers_beyond_the_models_blocks_is_a_config_error(tiny_llama_dir, tmp_path):
    with pytest.raises(ConfigError, match="between 1 and the model's 2 decoder blocks"):
        train(tiny_config(tiny_llama_dir, tmp_path, trainable_layers=3, eval_tasks=0))


def test_a_guide_replaces_one_episode_of_groups_that_never_solved_their_task(tiny_llama_dir, tmp_path):
    """A random model solves nothing: with ``guide: oracle`` every group trains on the oracle's
    episode of its task in place of one sample, whose tokens the update takes as the model's own
    (ratio 1, nothing clipped), and the step's groups are informative through it."""
    two_hops = {"n_passages": 300, "max_obs_tokens": 64, "hops": [2]}  # the oracle answers in 3 turns
    cfg = tiny_config(
        tiny_llama_dir, tmp_path, guide="oracle", env_kwargs=two_hops, max_turns=3, steps=1, eval_tasks=0,
        rewards={},
    )  # fmt: skip
    train(cfg)
    (row,) = [r for r in read_metrics(tmp_path) if "loss/policy" in r]
    assert row["rollout/guided_groups"] == 1.0 and row["rollout/degenerate_trained"] == 0.0
    assert row["loss/ratio"] == pytest.approx(1.0, abs=1e-3) and row["loss/clip_fraction"] == 0.0
    assert row["rollout/em"] == 0.5  # the guides' episodes answer right, the samples do not
    saved = [json.loads(line) for line in (tmp_path / "episodes" / "step-000001.jsonl").open()]
    assert any(row["em"] == 1.0 for row in saved)

    with pytest.raises(ConfigError, match="guide must be a scripted agent"):
        tiny_config(tiny_llama_dir, tmp_path, guide="hf:smollm2-135m-instruct")


def test_each_evaluation_is_reported_as_it_ends(tiny_llama_dir, tmp_path):
    """`train` hands every evaluation to ``on_eval`` when it ends (the CLI prints a line for each),
    in order and with the metrics the summary keeps."""
    seen = []
    cfg = tiny_config(
        tiny_llama_dir, tmp_path, steps=2, eval_every=1, warm_start_episodes=2, warm_start_batch_size=2
    )
    summary = train(cfg, on_eval=lambda when, metrics: seen.append((when, metrics)))
    assert [when for when, _ in seen] == ["base", "before", "step 1", "after"]
    assert seen[0][1] == summary["eval_base"] and seen[1][1] == summary["eval_before"]
    assert seen[-1][1] == summary["eval_after"] and "em_low" in seen[2][1]


def test_train_refuses_to_evaluate_on_the_questions_it_trains_on(tmp_path):
    """An env registered with one plain task list serves it as every split: `train` says so before
    it loads any model (the model path here does not even exist)."""
    from searchgym.envs.registry import register
    from searchgym.retrievers import BM25, Doc

    questions = [("When was the Turing machine described?", "1936"), ("Who wrote A-0?", "Grace Hopper")]
    docs = [Doc("d1", "Alan Turing", "Alan Turing described the Turing machine in 1936.")]
    register("test/PlainList-v0", tasks=questions, retriever=BM25.build(docs))
    try:
        cfg = tiny_config(tmp_path / "no-model", tmp_path, env="test/PlainList-v0", env_kwargs={})
        with pytest.raises(
            ConfigError,
            match=r"2 of the 2 'dev' questions .* also 'train' questions .*\(a plain list serves every split",
        ):
            train(cfg)
        cfg = tiny_config(
            tmp_path / "no-model", tmp_path, env="test/PlainList-v0", env_kwargs={}, eval_tasks=0
        )
        with pytest.raises(Exception) as error:  # without evaluations there is nothing to keep apart
            train(cfg)
        assert "questions" not in str(error.value)
    finally:
        del gym.registry["test/PlainList-v0"]
