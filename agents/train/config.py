"""`GRPOConfig`: everything `searchgym.agents.train.grpo.train` needs, read from YAML by `load_config`."""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from searchgym.agents.policies.models import resolve_chat_template
from searchgym.agents.registry import is_policy_agent
from searchgym.config_types import check_field_types, parse_yaml, read_yaml
from searchgym.envs.registry import check_rewards, env_factory
from searchgym.errors import ConfigError
from searchgym.generation import SamplingParams
from searchgym.registry import AGENTS, POLICIES, TRAINER_REWARDS, check_env_id, takes

Advantage = Literal["grpo", "dr_grpo", "stratified", "igpo"]
Aggregation = Literal["token_mean", "grpo", "dr_grpo"]
RolloutBackend = Literal["hf", "vllm"]


@dataclass
class GRPOConfig:
    """Everything `train` needs; `load_config` reads it from YAML (unknown keys are an error)."""

    # -- what to train, where
    model: str = "smollm2-135m-instruct"
    """Policy to start from: the offline alias, a hub id or a local directory."""
    policy: str = "hf"
    """The policy backend that loads ``model`` for training (a name in ``searchgym.list_policies()``
    or ``module:attr``): any `TrainablePolicy`, called as ``(model, device=, dtype=, seed=,
    show_progress=)``. On CPU, ``cpu`` rolls out faster (KV cache kept across turns, the same
    float32 log-probs) and ``cpu-bf16`` faster still, sampling in bfloat16 (see
    `searchgym.agents.policies.cached`)."""
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    """More keyword arguments for the backend, e.g. ``{max_batch_size: 32}`` (episodes decoded at
    once by ``hf`` and ``cpu``: fewer hold less memory, more decode faster) or ``{cache_bytes: N}``
    (the most ``cpu`` keeps of the episodes' keys and values)."""
    chat_template: str | None = None
    """A chat template to train with instead of the model's own, saved with every checkpoint: a
    ``.jinja`` file or the name of one trl ships. ``qwen2_5`` gives SmolLM2 (no tool calling)
    Qwen2.5's; with the ``tool_calls`` protocol, episodes are then the tokens trl's
    ``GRPOTrainer`` builds, so a checkpoint warm-started here is ready for trl."""
    env: str = "searchgym/FictionalQA-BM25-v0"
    """Registered env id; it must accept ``split`` (train on ``train_split``, evaluate on ``eval_split``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra arguments of the env factory (e.g. ``hops: [2]``, ``n_passages``)."""
    eval_env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Arguments of the env factory that differ in the evaluations, over ``env_kwargs``: e.g.
    train on 1- and 2-hop questions (``env_kwargs: {hops: [1, 2]}``) and evaluate on 2-hop ones
    (``eval_env_kwargs: {hops: [2]}``)."""
    train_split: str = "train"
    """The env's split the training tasks come from."""
    eval_split: str = "dev"
    """The env's split the evaluations play; it must not share questions with ``train_split``."""
    run_dir: str = "runs/grpo"
    """Checkpoints, metrics.jsonl, TensorBoard logs and plots go here."""
    seed: int = 0
    """Seeds the policy, the order of the training tasks, each step's sampling, the warm start's
    episodes and the evaluations' tasks and bootstrap intervals (>= 0)."""

    # -- rollout
    steps: int = 100
    """Optimizer steps of GRPO (each on one rollout batch); 0: only the warm start (and the
    evaluations before it), saved as the checkpoint of step 0."""
    tasks_per_step: int = 4
    """Tasks per step (summed over processes under `accelerate launch`)."""
    group_size: int = 8
    """Episodes per task (G); advantages compare episodes within a group."""
    max_turns: int = 4
    """The env's turn limit while training and evaluating (an episode then ends truncated)."""
    max_new_tokens: int = 128
    """Tokens the policy may write per turn."""
    temperature: float = 1.0
    """Sampling temperature of the rollouts (evaluations are greedy); the loss reads the same."""
    top_p: float = 1.0
    """Nucleus sampling of the rollouts: sample from the smallest set of tokens whose
    probabilities sum to at least this (1: from all)."""
    dynamic_sampling: bool = False
    """DAPO's dynamic sampling: drop groups whose rewards are all equal (no gradient) and play
    further tasks until the step has ``tasks_per_step`` informative groups. The env's rewards
    decide, before the trainer's terms are added: a group that only the information gain splits is
    dropped too."""
    max_refill_rounds: int = 3
    """Dynamic sampling: at most this many extra rounds of tasks per step."""
    max_refill_seconds: float | None = None
    """Dynamic sampling: no refill round starts once the step's rollout has run this long (None:
    no bound). A step that ends short trains on the informative groups it has, and says so."""
    oversample: float = 1.0
    """Dynamic sampling: the first round plays this many times ``tasks_per_step`` tasks (rounded
    up), side by side, so that the step seldom needs refill rounds, which decode only a few
    episodes at a time; the step still trains on ``tasks_per_step`` informative groups."""
    guide: str | None = None
    """A scripted agent (e.g. ``oracle``) whose episode takes the place of one sampled episode in
    every group that no sample solved (EM 0), where it earns more than they did: a task the
    policy never solves then still teaches it (off-policy guidance, as in LUFFY, Yan et al. 2025,
    without its policy shaping). The guide's tokens enter the loss with the trained model's own
    log-probs as the old ones (ratio 1, never clipped). None: groups hold sampled episodes only.
    From the main job's seed-1 warm start it lowered dev EM (docs/results.md, "Group size, updates
    per step, guidance")."""
    rollout_engine: RolloutBackend = "hf"
    """``vllm`` (GPU extra) generates with vLLM and receives the weights after every update."""
    program: str | None = None
    """Your own agent program (``module:function`` or ``file.py:function``) plays the episodes in
    place of searchgym's prompt loop: it gets each task's question, an OpenAI client whose calls
    a gateway records token by token, and the env's tools (see docs/programs.md). Information
    gain, IGPO and guides read searchgym's own prompts, so they do not apply to a program."""
    program_time_limit_s: float = 300.0
    """A program's episode that takes this long of its own time (wall-clock time less its waits for
    the model), or 10 times as long in wall-clock time, ends with an error: scored as the env left
    it, trained on the calls it made."""

    # -- rewards: the env's terms, and the trainer's (information gain), weighed in one mapping
    rewards: dict[str, Any] = field(default_factory=dict)
    """The reward weights (`searchgym.envs.rewards.RewardWeights`): outcome_metric, outcome,
    format, per_search, per_1k_obs_tokens, cost_only_if_correct, and ``terms``: ``{name: weight}``
    of episode terms, which the env scores, and of trainer terms, which train scores with the
    policy: ``info_gain``, IGPO's information gain (``searchgym list rewards``)."""

    # -- advantages and loss
    advantage: Advantage = "grpo"
    """grpo (group z-score), dr_grpo (no std), stratified (within equal search counts, blended with
    grpo), igpo (turn-level: information gain per turn, outcome at the end)."""
    stratified_alpha: float = 0.5
    """Stratified: weight of the within-stratum advantage against the group one."""
    igpo_gamma: float = 1.0
    """IGPO: discount of later turns' rewards."""
    loss_aggregation: Aggregation = "token_mean"
    """token_mean (every policy token weighs the same, DAPO), grpo (mean per episode, then over
    episodes), dr_grpo (sum over tokens / (episodes x max_turns x max_new_tokens))."""
    clip_low: float = 0.2
    """PPO's lower clip: the importance ratio is clipped at ``1 - clip_low``."""
    clip_high: float = 0.2
    """PPO's upper clip: the ratio is clipped at ``1 + clip_high`` (DAPO's clip-higher sets it
    above ``clip_low``)."""
    kl_coef: float = 0.0
    """Weight of the k3 KL to the policy GRPO starts from, after the warm start (0: no reference
    model is kept)."""
    entropy_coef: float = 0.0
    """Weight of an entropy bonus: the loss subtracts ``entropy_coef`` times the mean entropy of
    the policy's sampled-token distributions (at ``temperature``, aggregated as the loss is), so
    that the sampled episodes of a group keep differing (0: none; the loss still logs the
    entropy)."""
    updates_per_step: int = 1
    """Optimizer steps on each rollout batch (mu); above 1 the importance ratio departs from 1."""
    tis_cap: float = 0.0
    """Truncated importance sampling for a rollout engine whose numbers differ from the trained
    model's (an int8 or bfloat16 copy, vLLM): the update's old log-probs become the trained model's
    own, and each token's loss is weighted by min(p_model / p_sampler, tis_cap), so that the
    sampler's differences are corrected instead of clipped (Yao et al. 2025 cap it at 2). 0: the
    sampler's log-probs are the old ones. Needs updates_per_step: 1."""

    # -- optimisation
    lr: float = 1e-6
    """AdamW's learning rate in the GRPO updates."""
    lr_warmup_steps: int = 0
    """GRPO steps over which the learning rate rises linearly to ``lr`` (step k of n at k/(n+1) of
    it); 0: ``lr`` from the first step. Adam's first steps move every trained weight by about the
    learning rate whatever its gradient's size, so they are the noisiest."""
    weight_decay: float = 0.0
    """AdamW's decoupled weight decay (>= 0)."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm before each optimizer step."""
    micro_batch_size: int = 4
    """Episodes per forward/backward, in the GRPO update and in the warm start (there, its greatest
    common divisor with ``warm_start_batch_size``, so that SFT steps are unchanged); gradients
    accumulate over the step's whole batch. The activations of 4 two-hop episodes took the main
    job to 10 GB in float32; 2 keep it lower (see configs/quickstart.yaml)."""
    share_prompts: bool = True
    """The update reads the prompt a group's episodes share once, not once per episode: its keys
    and values serve every episode's forward, and the gradient they collect flows back through
    it once (single-process runs without a KL reference; elsewhere every episode is read whole)."""
    trainable_layers: int = 0
    """GRPO updates only the last this many decoder blocks and the final norm; the embeddings
    and the blocks below stay as the warm start left them (0: every parameter). Backward stops
    that many blocks down, so an update costs less and holds fewer activations."""
    bf16: bool | Literal["auto"] | None = None
    """bfloat16 autocast of the warm start and the GRPO updates. None: where the GPU supports it
    (never on CPU); ``auto``: also on a CPU with native bfloat16 matmuls (AVX512-BF16, AMX);
    ``true``: required (an error where unsupported)."""

    # -- warm start: SFT on the oracle agent's episodes before GRPO
    warm_start_episodes: int = 0
    """Episodes of ``warm_start_agent`` to fine-tune on first (0: no warm start)."""
    warm_start_agent: str = "oracle"
    """The scripted agent whose episodes the warm start imitates (a registered name or ``module:attr``)."""
    warm_start_epochs: int = 1
    """Passes of the warm start over its episodes."""
    warm_start_lr: float = 5e-5
    """AdamW's learning rate in the warm start."""
    warm_start_batch_size: int = 8
    """Episodes per warm-start optimizer step."""

    # -- evaluation, checkpoints, logging
    eval_tasks: int = 64
    """Dev tasks evaluated greedily before and after GRPO, and before the warm start when there is
    one and ``eval_base`` is set (0: none)."""
    eval_base: bool = True
    """With a warm start, also evaluate the model as loaded, before it."""
    eval_every: int = 0
    """Also evaluate every this many steps (0: only before and after)."""
    checkpoint_every: int = 10
    """Save a checkpoint every this many steps (and at the last one)."""
    keep_checkpoints: int = 2
    """The newest checkpoints kept; step 0 (the start of GRPO, the KL reference) is kept besides."""
    resume: bool = False
    """Continue from the newest checkpoint in ``run_dir``."""
    overwrite: bool = False
    """Start afresh in a ``run_dir`` that holds checkpoints (its later checkpoints are deleted)."""
    log_episodes: int = 4
    """Rollout episodes saved per step, spread over its groups, under ``run_dir/episodes/`` for
    ``searchgym view`` (0: none)."""
    tensorboard: bool | None = None
    """None: log to TensorBoard when it is installed."""
    progress: bool = True
    """Show progress bars (``--no-progress`` turns them off)."""

    def __post_init__(self) -> None:
        """Every value checked before any model or env loads: types, ranges, choices, the env id
        and the keyword arguments its factory takes, the reward weights, the agents, the policy
        backend and the chat template."""
        check_field_types(self)
        _check_choice("advantage", self.advantage, Advantage)
        _check_choice("loss_aggregation", self.loss_aggregation, Aggregation)
        _check_choice("rollout_engine", self.rollout_engine, RolloutBackend)
        for name in ("model", "policy", "env", "train_split", "eval_split", "run_dir", "warm_start_agent"):
            if not getattr(self, name).strip():
                raise ConfigError(f"{name} must not be empty")
        for name, (inside, words) in RANGES.items():
            value = getattr(self, name)
            if value is None:
                continue
            if (isinstance(value, float) and not math.isfinite(value)) or not inside(value):
                raise ConfigError(f"{name} must be {words}, got {value!r}")
        if self.tis_cap and (self.tis_cap < 1 or self.updates_per_step != 1):
            raise ConfigError(
                f"tis_cap must be 0 (off) or >= 1 with updates_per_step: 1; got tis_cap {self.tis_cap} "
                f"and updates_per_step {self.updates_per_step}"
            )
        if self.oversample > 1 and not self.dynamic_sampling:
            raise ConfigError(
                "oversample plays extra tasks for dynamic sampling: set dynamic_sampling: true, "
                "or oversample: 1"
            )
        self._check_env()
        for name, weight in self.trainer_terms.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
                raise ConfigError(
                    f"the weight of reward term {name!r} must be a finite number, got {weight!r}"
                )
        check_rewards(self.env, self.env_rewards)  # unknown or bad weights fail here, not at the first step
        self._check_agents_and_policy()
        if self.program is not None:
            self._check_program()
        if self.advantage == "igpo" and not any(w > 0 for w in self.trainer_terms.values()):
            raise ConfigError(
                "advantage: igpo rewards each turn with the trainer's terms: weigh one, e.g. "
                "rewards: {terms: {info_gain: 1.0}} (IGPO's information gain)"
            )
        if self.chat_template is not None:
            resolve_chat_template(self.chat_template)  # an unknown name or missing file fails here

    def _check_env(self) -> None:
        """The env is registered and its factory takes ``split`` and each key of ``env_kwargs``
        (a factory that takes ``**options`` checks those when it is made, before any model loads)."""
        check_env_id(self.env)
        owned = {"split": "train_split and eval_split", "max_turns": "max_turns", "rewards": "rewards"}
        for name in ("env_kwargs", "eval_env_kwargs"):
            for key in getattr(self, name):
                if key in owned:
                    raise ConfigError(f"{name}: {key} is set by the config key(s) {owned[key]}; set it there")
        creator = env_factory(self.env)
        keys = dict.fromkeys(("split", *self.env_kwargs, *self.eval_env_kwargs))
        unknown = [key for key in keys if not takes(creator, key)]
        if unknown:
            raise ConfigError(
                f"{self.env} takes no {', '.join(map(repr, unknown))} "
                f"(its factory is {getattr(creator, '__qualname__', creator)}); "
                + (
                    "train needs an env with splits"
                    if "split" in unknown
                    else "check env_kwargs and eval_env_kwargs"
                )
            )

    def _check_agents_and_policy(self) -> None:
        for name, agent in (("warm_start_agent", self.warm_start_agent), ("guide", self.guide)):
            if agent is None:
                continue
            if is_policy_agent(agent):
                raise ConfigError(
                    f"{name} must be a scripted agent ({', '.join(AGENTS.names())}, or 'module:attr'), "
                    f"got {agent!r}"
                )
            spec = AGENTS.spec(agent)  # an unknown name fails here, suggesting the closest
            if ":" in agent:
                spec.load()  # a module that is not there, or an attribute that cannot be called
        spec = POLICIES.spec(self.policy)
        loader = spec.load() if self.policy_kwargs or ":" in self.policy else None
        unknown = [key for key in self.policy_kwargs if not takes(loader, key)]
        if unknown:
            raise ConfigError(
                f"policy {self.policy!r} takes no {', '.join(map(repr, unknown))} (policy_kwargs); "
                f"see the arguments of {spec.entry_point}"
            )

    def _check_program(self) -> None:
        """The program loads, and no option that reads searchgym's own prompts is set."""
        from searchgym.agents.play.programs import load_program  # lazy: the openai client

        load_program(self.program)  # type: ignore[arg-type]
        clashes = {
            f"the trainer's reward terms ({', '.join(self.trainer_terms)})": self.trainer_terms,
            "advantage: igpo": self.advantage == "igpo",
            "guide": self.guide,
        }
        set_ = [name for name, value in clashes.items() if value]
        if set_:
            raise ConfigError(
                f"{', '.join(set_)} read searchgym's own prompts and do not apply to a program "
                f"({self.program}); unset them to train it"
            )

    @property
    def trainer_terms(self) -> dict[str, float]:
        """``{name: weight}`` of the trainer's terms in ``rewards.terms`` (those the env does not score)."""
        terms = self.rewards.get("terms")
        if not isinstance(terms, dict):
            return {}
        return {name: weight for name, weight in terms.items() if name in TRAINER_REWARDS}

    @property
    def env_rewards(self) -> dict[str, Any]:
        """``rewards`` as the env takes them: without the trainer's terms."""
        if not self.trainer_terms:
            return self.rewards
        terms = {n: w for n, w in self.rewards["terms"].items() if n not in self.trainer_terms}
        return {k: v for k, v in self.rewards.items() if k != "terms"} | ({"terms": terms} if terms else {})

    @property
    def sampling(self) -> SamplingParams:
        """How training episodes are sampled; the update scores their tokens under the same
        temperature."""
        return SamplingParams(
            max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p
        )


def _at_least(low: float) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v >= low), f">= {low}"


RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "seed": (lambda v: 0 <= v < 2**32, "from 0 to 2**32 - 1"),
    "steps": _at_least(0),
    "tasks_per_step": _at_least(1),
    "group_size": (lambda v: v >= 2, ">= 2 (GRPO compares episodes of a task)"),
    "max_turns": _at_least(1),
    "max_new_tokens": _at_least(1),
    "temperature": (lambda v: v > 0, "> 0: GRPO needs sampled episodes"),
    "top_p": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "max_refill_rounds": _at_least(0),
    "max_refill_seconds": (lambda v: v >= 0, ">= 0 (or null: no bound)"),
    "program_time_limit_s": (lambda v: v > 0, "> 0"),
    "oversample": (lambda v: v >= 1, ">= 1 (a factor on tasks_per_step)"),
    "stratified_alpha": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "igpo_gamma": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "clip_low": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "clip_high": _at_least(0),
    "kl_coef": _at_least(0),
    "entropy_coef": _at_least(0),
    "updates_per_step": _at_least(1),
    "tis_cap": _at_least(0),
    "lr": (lambda v: v > 0, "> 0"),
    "lr_warmup_steps": _at_least(0),
    "weight_decay": _at_least(0),
    "max_grad_norm": (lambda v: v > 0, "> 0 (the norm gradients are clipped to)"),
    "micro_batch_size": _at_least(1),
    "trainable_layers": _at_least(0),
    "warm_start_episodes": _at_least(0),
    "warm_start_epochs": _at_least(1),
    "warm_start_lr": (lambda v: v > 0, "> 0"),
    "warm_start_batch_size": _at_least(1),
    "eval_tasks": _at_least(0),
    "eval_every": _at_least(0),
    "checkpoint_every": _at_least(1),
    "keep_checkpoints": _at_least(1),
    "log_episodes": _at_least(0),
}
"""The values each numeric field of `GRPOConfig` takes, in words for its error (a float must also
be finite; None, where a field allows it, is not checked)."""


def _check_choice(name: str, value: Any, choices: Any) -> None:
    allowed = choices.__args__
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


MOVED_KEYS = {"info_gain": "rewards: {terms: {info_gain: W}} (--set rewards.terms.info_gain=W)"}
"""Config keys that are gone, and where their setting lives now."""


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> GRPOConfig:
    """A `GRPOConfig` from a YAML file and ``key=value`` overrides (values parsed as YAML); a
    dotted key sets one entry of a mapping, keeping the others.

    >>> load_config(None, ["steps=3", "rewards={per_search: 0.1}", "rewards.terms.info_gain=0.5"]).rewards
    {'per_search': 0.1, 'terms': {'info_gain': 0.5}}
    """
    values: dict[str, Any] = {}
    if path is not None:
        values = read_yaml(path) or {}  # a missing file names itself
        if not isinstance(values, dict):
            raise ConfigError(f"{path} must hold a mapping of config keys, got {type(values).__name__}")
    return config_from(apply_overrides(values, overrides))


def load_run_config(run_dir: str | Path, overrides: Sequence[str] = ()) -> GRPOConfig:
    """The config a training run recorded (``RUN_DIR/config.json``), with ``overrides``; a key
    that has moved since the run is read where it lives now (``info_gain``, which igpo raised to
    at least 1, into ``rewards.terms``)."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise ConfigError(f"{path} is not there: give the run directory of a `searchgym train` run")
    values = json.loads(path.read_text(encoding="utf-8"))
    gain = values.pop("info_gain", 0.0)
    if values.get("advantage") == "igpo":
        gain = max(gain, 1.0)  # as igpo weighed it then
    if gain:
        values["rewards"] = {**values.get("rewards", {})}
        values["rewards"]["terms"] = {**values["rewards"].get("terms", {}), "info_gain": gain}
    return config_from(apply_overrides(values, overrides))


def apply_overrides(values: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``values`` with each ``key=value`` of ``overrides`` set (the value parsed as YAML); a dotted
    key sets one entry of a mapping, keeping the others."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"overrides look like key=value, got {item!r}")
        *parents, leaf = key.strip().split(".")
        mapping = values
        for i, part in enumerate(parents):
            mapping = mapping.setdefault(part, {})
            if not isinstance(mapping, dict):
                raise ConfigError(f"--set {key.strip()}: {'.'.join(parents[: i + 1])} is not a mapping")
        mapping[leaf] = parse_yaml(raw, f"--set {key.strip()}")
    return values


def config_from(values: dict[str, Any]) -> GRPOConfig:
    """A `GRPOConfig` of ``values``; a moved or unknown key is a `ConfigError` that says where it
    lives now, or the closest known one."""
    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    moved = [f"{k} (now {MOVED_KEYS[k]})" for k in sorted(set(values) & set(MOVED_KEYS))]
    if moved:
        raise ConfigError(f"config key(s) moved: {', '.join(moved)}")
    unknown = sorted(set(values) - known)
    if unknown:
        hints = [
            f"{k} (did you mean {m[0]}?)" if (m := difflib.get_close_matches(k, known, 1)) else k
            for k in unknown
        ]
        raise ConfigError(f"unknown config key(s): {', '.join(hints)}")
    return GRPOConfig(**values)
