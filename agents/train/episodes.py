"""The episodes of GRPO training: the policies that generate them, which tasks a step plays,
playing them in groups, greedy evaluation and the scripted warm start.
`searchgym.agents.train.grpo` calls these; ``cfg`` is its `GRPOConfig`."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from searchgym.agents.train.advantages import degenerate_groups
from searchgym.errors import ConfigError
from searchgym.stats import bootstrap_ci, paired_bootstrap_ci

if TYPE_CHECKING:
    from searchgym.agents.train.config import GRPOConfig


def load_policies(cfg: GRPOConfig, device: torch.device):
    """The trainable policy (``cfg.policy``'s backend loading ``cfg.model``) and the policy that
    plays episodes (itself, or a vLLM engine), both with ``cfg.chat_template`` where one is set."""
    from searchgym.agents.policies.base import check_trainable
    from searchgym.agents.policies.models import resolve_chat_template
    from searchgym.registry import POLICIES

    policy = POLICIES.make(
        cfg.policy,
        cfg.model,
        device=str(device),
        dtype="float32",
        seed=cfg.seed,
        show_progress=cfg.progress,
        **cfg.policy_kwargs,
    )
    check_trainable(policy, cfg.policy)
    rollout_policy = policy
    if cfg.rollout_engine == "vllm":
        from searchgym.agents.policies.vllm import VLLMPolicy

        rollout_policy = VLLMPolicy(cfg.model, seed=cfg.seed)
    if cfg.chat_template is not None:
        template = resolve_chat_template(cfg.chat_template)
        for p in {id(policy): policy, id(rollout_policy): rollout_policy}.values():
            p.tokenizer.chat_template = template
    return policy, rollout_policy


def sync_rollout_weights(rollout_policy: Any, model: torch.nn.Module) -> None:
    """Push the trained weights into a separate rollout engine (vLLM); a no-op for HF."""
    if getattr(rollout_policy, "model", None) is not model:
        rollout_policy.load_weights((name, p.detach()) for name, p in model.state_dict().items())


def make_env(cfg: GRPOConfig, split: str) -> Any:
    from searchgym.envs.registry import make

    kwargs = {"split": split, "max_turns": cfg.max_turns, **cfg.env_kwargs}
    if cfg.rewards:
        kwargs["rewards"] = cfg.rewards
    return make(cfg.env, **kwargs)


def check_splits_apart(cfg: GRPOConfig) -> None:
    """`ConfigError` when the tasks `train` evaluates share questions with those it trains on: its
    dev EM would then measure recall of trained answers. A user's env registered with one plain
    task list serves the same questions as every split, so this is where that is caught."""
    if not (cfg.eval_tasks and cfg.steps + cfg.warm_start_episodes):
        return
    train_env, eval_env = make_env(cfg, cfg.train_split), make_env(cfg, cfg.eval_split)
    trained = {t.question.strip().lower() for t in train_env.unwrapped.tasks}
    evaluated = list(eval_env.unwrapped.tasks)[: cfg.eval_tasks]
    shared = [t.question for t in evaluated if t.question.strip().lower() in trained]
    train_env.close()
    eval_env.close()
    if shared:
        raise ConfigError(
            f"{len(shared)} of the {len(evaluated)} {cfg.eval_split!r} questions that train evaluates are "
            f"also {cfg.train_split!r} questions of {cfg.env} (e.g. {shared[0]!r}), so its dev EM would "
            "measure memorised answers: register the env with tasks={'train': [...], 'dev': [...]} (a plain "
            "list serves every split), or set train_split and eval_split to splits that do not overlap"
        )


def per_process(n: int, accelerator: Any) -> int:
    if n % accelerator.num_processes:
        raise ConfigError(f"{n} tasks cannot be split evenly over {accelerator.num_processes} processes")
    return n // accelerator.num_processes


def split_warm_start(tasks: Sequence[Any], cfg: GRPOConfig) -> tuple[list[Any], list[Any]]:
    """``(warm-start tasks, GRPO tasks)``: the first ``warm_start_episodes`` of a seeded shuffle
    are imitated; GRPO trains on the others, so that RL does not replay questions SFT memorised
    (a memorised question is solved in every sample of its group and teaches nothing). GRPO
    keeps every task when the warm start uses them all."""
    order = torch.randperm(len(tasks), generator=torch.Generator().manual_seed(cfg.seed)).tolist()
    chosen = set(order[: cfg.warm_start_episodes])
    rest = [t for i, t in enumerate(tasks) if i not in chosen]
    return [tasks[i] for i in order[: cfg.warm_start_episodes]], rest or list(tasks)


def step_tasks(tasks: Sequence[Any], step: int, cfg: GRPOConfig, accelerator: Any) -> list[Any]:
    """This process's share of step ``step``'s tasks: a fresh seeded shuffle of the training
    tasks each epoch, consumed in order, so any step's tasks follow from its number (resume)."""
    per_step, out = cfg.tasks_per_step, []
    for position in range(step * per_step, (step + 1) * per_step):
        epoch, i = divmod(position, len(tasks))
        order = torch.randperm(len(tasks), generator=torch.Generator().manual_seed(cfg.seed * 7919 + epoch))
        out.append(tasks[int(order[i])])
    share = per_process(per_step, accelerator)
    return out[accelerator.process_index * share : (accelerator.process_index + 1) * share]


def first_round_size(cfg: GRPOConfig, accelerator: Any) -> int:
    """Groups this process plays side by side in a step's first round: its share of the step's
    tasks, times ``oversample`` under dynamic sampling."""
    share = per_process(cfg.tasks_per_step, accelerator)
    return math.ceil(share * cfg.oversample) if cfg.dynamic_sampling else share


def step_seed(cfg: GRPOConfig, step: int, accelerator: Any) -> int:
    return (cfg.seed * 1_000_003 + step * 7_919 + accelerator.process_index * 104_729) % 2**31


def play_groups(
    policy: Any,
    envs: Sequence[Any],
    tasks: Sequence[Any],
    cfg: GRPOConfig,
    seed: int,
    on_turn: Callable[[int], None] | None = None,
) -> list[list[Any]]:
    """``group_size`` sampled episodes of every task, all envs in one batched rollout; returns
    the episodes grouped by task."""
    from searchgym.agents.policies.agent import PolicyAgent
    from searchgym.agents.rollout import rollout
    from searchgym.generation import SamplingParams

    # not SamplingParams(seed=...): that seed would replay the same draws at every turn, which
    # made a policy that verifies in 44 % of its episodes do so in 6 % of them
    policy.reseed(seed)
    params = SamplingParams(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p)
    agents = [PolicyAgent(policy, params) for _ in envs]
    repeated = [task for task in tasks for _ in range(cfg.group_size)]
    episodes: list[Any] = [None] * len(repeated)
    for i, episode in rollout(envs, agents, repeated, seed=seed, on_turn=on_turn):
        if episode.trajectory is None:
            raise ConfigError(f"GRPO trains a local model; policy {policy.name!r} returned no tokens")
        episodes[i] = episode
    return [episodes[g * cfg.group_size : (g + 1) * cfg.group_size] for g in range(len(tasks))]


def play_step(
    policy: Any,
    envs: Sequence[Any],
    train_tasks: Sequence[Any],
    step: int,
    cfg: GRPOConfig,
    accelerator: Any,
    status: Callable[[str], None] = lambda text: None,
) -> tuple[list[list[Any]], dict[str, float]]:
    """The groups step ``step`` learns from, and how many were played. Without dynamic sampling,
    the step's tasks (`step_tasks`). With it (DAPO), groups whose rewards are all equal carry no
    gradient and are dropped, and further tasks (drawn by step and round, so a resumed run draws
    the same) are played in up to ``max_refill_rounds`` rounds until the step has as many
    informative groups as tasks; the first round already adds such tasks (``oversample``). The
    CPU engine keeps the trained episodes' keys and values, across rounds, for the information
    gain (the others' it frees at once): call `drop_caches` before the update. Refill rounds stop
    after ``max_refill_seconds`` too; ``rollout/short_groups`` counts the informative groups the
    step lacks. ``status(text)`` hears the round and the turns played, as they are played."""
    tasks = step_tasks(train_tasks, step, cfg, accelerator)
    start = time.perf_counter()
    seed = step_seed(cfg, step, accelerator)

    def drawn(n: int, round_: int) -> list[Any]:
        rng = torch.Generator().manual_seed(seed * 31 + round_)
        return [train_tasks[int(i)] for i in torch.randint(len(train_tasks), (n,), generator=rng)]

    def play(tasks: Sequence[Any], seed: int, round_: int = 0) -> list[list[Any]]:
        turns = 0

        def on_turn(n: int) -> None:
            nonlocal turns
            turns += n
            status(f"round {round_}: {len(tasks)} groups, {turns} turns")

        groups = play_groups(policy, envs[: len(tasks) * cfg.group_size], tasks, cfg, seed, on_turn)
        return guided(policy, envs, tasks, groups, cfg, seed) if cfg.guide else groups

    first = list(tasks)
    if cfg.dynamic_sampling:
        first += drawn(first_round_size(cfg, accelerator) - len(tasks), 0)
    groups = play(first, seed)
    played, degenerate = len(groups), sum(map(is_degenerate, groups))
    if cfg.dynamic_sampling:
        kept = informative(policy, groups)
        for round_ in range(1, cfg.max_refill_rounds + 1):
            missing = len(tasks) - len(kept)
            out_of_time = (
                cfg.max_refill_seconds is not None and time.perf_counter() - start > cfg.max_refill_seconds
            )
            if missing <= 0 or out_of_time:
                break
            more = play(drawn(missing, round_), seed + round_ * 104_729, round_)
            played, degenerate = played + len(more), degenerate + sum(map(is_degenerate, more))
            kept += informative(policy, more)
        forget(policy, kept[len(tasks) :])
        groups = kept[: len(tasks)] or groups  # none informative: learn nothing from the step's own
        short = max(len(tasks) - len(kept), 0)
    metrics = {
        "rollout/degenerate_groups": degenerate / played,
        "rollout/groups_played": float(played),
        "rollout/groups_trained": float(len(groups)),
    }
    if cfg.dynamic_sampling:
        metrics["rollout/short_groups"] = float(short)
    if cfg.guide:
        metrics["rollout/guided_groups"] = sum(is_guided(g[-1]) for g in groups) / len(groups)
    return groups, metrics


def guided(
    policy: Any,
    envs: Sequence[Any],
    tasks: Sequence[Any],
    groups: list[list[Any]],
    cfg: GRPOConfig,
    seed: int,
) -> list[list[Any]]:
    """``groups`` (of ``tasks``) with the last episode of each group that no sample solved
    replaced by ``cfg.guide``'s episode of its task, where that earns more than every sample did
    (see `GRPOConfig.guide`). The guide's policy tokens get NaN log-probs (`is_guided`), which the
    update reads as "not sampled": the trained model's own log-probs stand in for them."""
    from searchgym.agents.train.warm_start import scripted_episodes

    failed = [i for i, group in enumerate(groups) if not any(ep.em for ep in group)]
    if not failed:
        return groups
    guides = scripted_episodes(
        envs[: len(failed)], [tasks[i] for i in failed], policy.tokenizer, agent=cfg.guide, seed=seed
    )
    out = list(groups)
    for i, guide in zip(failed, guides):
        if guide.total_reward > max(ep.total_reward for ep in groups[i]):
            forget(policy, [groups[i][-1:]])
            guide.trajectory.logprobs = [math.nan if m else 0.0 for m in guide.trajectory.mask]
            out[i] = [*groups[i][:-1], guide]
    return out


def is_guided(episode: Any) -> bool:
    """Whether ``episode`` is a guide's (`guided`), not the policy's own."""
    return any(map(math.isnan, episode.trajectory.logprobs))


def informative(policy: Any, groups: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """The groups whose rewards differ; what the policy kept of the others' episodes is freed."""
    forget(policy, [g for g in groups if is_degenerate(g)])
    return [g for g in groups if not is_degenerate(g)]


def forget(policy: Any, groups: Sequence[Sequence[Any]]) -> None:
    """Free what a policy kept of these groups' episodes (the CPU engine's keys and values),
    which the step will not train on."""
    if hasattr(policy, "forget"):
        for group in groups:
            for episode in group:
                policy.forget(episode.trajectory.prompt_ids + episode.trajectory.ids)


def drop_caches(policy: Any) -> None:
    """Free what a policy kept of the episodes it just played (the CPU engine's keys and values),
    once the information gain has read them: no later call can use them, since the next update
    changes the weights they belong to, and the update's activations need the memory."""
    if hasattr(policy, "drop_caches"):
        policy.drop_caches()


def is_degenerate(group: Sequence[Any]) -> bool:
    """All episodes of the group earned the same reward: its advantages are all zero."""
    return bool(degenerate_groups(torch.tensor([[ep.total_reward for ep in group]], dtype=torch.float64))[0])


def evaluate(cfg: GRPOConfig, policy: Any, accelerator: Any = None) -> dict[str, Any]:
    """Greedy episodes on the first ``cfg.eval_tasks`` tasks of the eval split (shared out over
    processes); mean EM (with its 95 % bootstrap interval, ``em_low``/``em_high``), F1, searches,
    turns and invalid-action rate, and ``em_per_task`` (in task order) for paired comparisons."""
    from searchgym.agents.policies.agent import PolicyAgent
    from searchgym.agents.rollout import episode_progress, run_episodes
    from searchgym.generation import SamplingParams

    env = make_env(cfg, cfg.eval_split)
    tasks = list(env.unwrapped.tasks)[: cfg.eval_tasks]
    env.close()
    if not tasks:
        raise ConfigError(
            f"nothing to evaluate: eval_tasks is {cfg.eval_tasks} and the {cfg.eval_split!r} split has "
            f"{len(env.unwrapped.tasks)} tasks; set eval_tasks to 1 or more (0 skips `train`'s evaluations)"
        )
    rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
    mine = tasks[rank::world]
    params = SamplingParams(max_new_tokens=cfg.max_new_tokens, temperature=0.0)
    show = cfg.progress and rank == 0
    exact = getattr(policy, "float_weights", contextlib.nullcontext)  # not the CPU engine's int8 copy
    with exact(), episode_progress(len(mine), f"{cfg.eval_split} eval", disable=not show) as callbacks:
        episodes = run_episodes(
            lambda: make_env(cfg, cfg.eval_split),
            lambda: PolicyAgent(policy, params),
            mine,
            # a policy that decodes in batches of max_batch_size (HF, the CPU engine) gets that many
            # episodes at a time: more would only queue, and would outgrow the CPU engine's cache
            # of each episode's keys and values, which then re-reads whole episodes every turn
            n_envs=min(len(mine), getattr(policy, "max_batch_size", len(mine))),
            seed=cfg.seed,
            **callbacks,
        )
    drop_caches(policy)
    rows = [
        (rank + world * i, e.em, e.f1, e.n_searches, e.n_turns, e.n_invalid) for i, e in enumerate(episodes)
    ]
    if world > 1:
        from accelerate.utils import gather_object

        rows = gather_object(rows)
    rows.sort()
    n = len(rows)
    _, em, f1, searches, turns, invalid = (list(column) for column in zip(*rows))
    em_low, em_high = bootstrap_ci(em, seed=cfg.seed)
    return {
        "n": n,
        "em": sum(em) / n,
        "em_low": em_low,
        "em_high": em_high,
        "f1": sum(f1) / n,
        "searches": sum(searches) / n,
        "turns": sum(turns) / n,
        "invalid_rate": sum(invalid) / max(sum(turns), 1),
        "em_per_task": em,
    }


def paired_difference(before: dict[str, Any], after: dict[str, Any], seed: int = 0) -> dict[str, float]:
    """``after``'s EM minus ``before``'s on the same tasks (two `evaluate` results), with the 95 %
    paired-bootstrap interval of the difference."""
    low, high = paired_bootstrap_ci(before["em_per_task"], after["em_per_task"], seed=seed)
    return {"em_diff": after["em"] - before["em"], "em_diff_low": low, "em_diff_high": high}


def warm_start(cfg: GRPOConfig, model: Any, tokenizer: Any, accelerator: Any) -> list[float]:
    """Supervised fine-tuning on ``cfg.warm_start_agent``'s episodes of training tasks, so that a
    small model knows the action protocol before RL; returns the per-step losses."""
    from searchgym.agents.train.warm_start import oracle_trajectories, sft

    env = make_env(cfg, cfg.train_split)
    chosen, _ = split_warm_start(list(env.unwrapped.tasks), cfg)
    env.close()
    trajectories = oracle_trajectories(
        [make_env(cfg, cfg.train_split)], chosen, tokenizer, agent=cfg.warm_start_agent, seed=cfg.seed
    )
    # the steps of warm_start_batch_size episodes, in micro-batches no larger than the GRPO update's
    micro = math.gcd(cfg.warm_start_batch_size, cfg.micro_batch_size)
    return sft(
        model,
        trajectories,
        lr=cfg.warm_start_lr,
        epochs=cfg.warm_start_epochs,
        batch_size=micro,
        grad_accum=cfg.warm_start_batch_size // micro,
        seed=cfg.seed,
        autocast=accelerator.autocast,  # bfloat16 where `bf16` asks for it, as in the GRPO update
        progress=cfg.progress,
    )
