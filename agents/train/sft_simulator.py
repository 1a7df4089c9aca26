"""Supervised fine-tuning that turns a small model into a search simulator (ZeroSearch).

Training pairs come from a real corpus: for each sampled query, the *useful* target is what a
real retriever (BM25) returns for it and the *noisy* target is passages retrieved for other,
unrelated queries (none mentioning the gold answer). Prompts are exactly the ones `Simulated`
sends and targets are written with `format_documents`, the format its parser reads, so the
fine-tuned model drops straight into `Simulated`. Each pair becomes a token stream
(`simulator_trajectories`): the prompt as a policy's chat template renders it for generation,
then the reply as the template closes the assistant turn, up to its end-of-turn token; the
warm start's `sft` trains on it with the loss on the reply only.

    rows = simulator_examples(world_queries(load_world(seed=0)), BM25.build(docs))
    result = train_simulator(rows, SimulatorSFTConfig(model="smollm2-135m-instruct", out="runs/sim"))
    Simulated(HFPolicy("runs/sim"))
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as transformers_logging

from searchgym.agents.policies.agent import Trajectory
from searchgym.agents.policies.models import DEFAULT_MODEL, resolve_model
from searchgym.agents.train.warm_start import sft
from searchgym.errors import ConfigError
from searchgym.generation import Message
from searchgym.retrievers.base import Doc, Retriever, SearchContext
from searchgym.retrievers.simulated import format_documents, simulator_messages
from searchgym.tasks.world import World

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimQuery:
    """A query to simulate, with the episode context the prompt shows (None: the query alone)."""

    query: str
    context: SearchContext | None = None


def world_queries(world: World, split: str = "train") -> list[SimQuery]:
    """Every hop's query of the ``split`` questions of a generated world, each with its question
    and gold answers (what an agent would search for, and what `Simulated` would be shown)."""
    out: dict[SimQuery, None] = {}
    for task in world.tasks(split):
        context = SearchContext(task.question, tuple(task.answers))
        for hop in task.metadata.get("chain", []):
            out[SimQuery(hop["query"], context)] = None
    return list(out)


def corpus_queries(docs: Sequence[Doc], n: int, *, seed: int = 0) -> list[SimQuery]:
    """``n`` passage titles (the first words of the text where a passage has no title), sampled
    without replacement; no context, since a bare corpus has no questions."""
    rng = np.random.default_rng(seed)
    picked = rng.permutation(len(docs))[:n]
    queries = {(docs[i].title or " ".join(docs[i].text.split()[:8])).strip(): None for i in picked}
    return [SimQuery(q) for q in queries if q]


def simulator_examples(
    queries: Sequence[SimQuery],
    retriever: Retriever,
    *,
    k: int = 5,
    noisy: bool = True,
    seed: int = 0,
    max_doc_chars: int = 600,
) -> list[dict[str, Any]]:
    """SFT rows ``{"messages": [prompt, reply], "mode": "useful" | "noisy"}``: a useful row per
    query whose top ``k`` is not empty and, with ``noisy``, a noisy row whose ``k`` passages were
    retrieved for other queries and mention none of the gold answers (seeded choice)."""
    if k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    if not queries:
        raise ConfigError("no queries to build examples from")
    results = retriever.batch_search([q.query for q in queries], k)
    pool = list({d.id: d for docs in results for d in docs}.values())
    rng = np.random.default_rng(seed)
    rows = []
    for q, docs in zip(queries, results):
        if not docs:
            continue
        rows.append(_row(q, docs, noisy=False, max_doc_chars=max_doc_chars))
        if noisy:
            others = _unrelated(pool, docs, q.context.answers if q.context else ())
            if len(others) >= k:
                chosen = [others[i] for i in rng.choice(len(others), size=k, replace=False)]
                rows.append(_row(q, chosen, noisy=True, max_doc_chars=max_doc_chars))
    if not rows:
        raise ConfigError("the retriever found nothing for any query; check the corpus and the queries")
    return rows


def _row(q: SimQuery, docs: Sequence[Doc], *, noisy: bool, max_doc_chars: int) -> dict[str, Any]:
    prompt = simulator_messages(q.query, len(docs), noisy=noisy, context=q.context)
    reply = {"role": "assistant", "content": format_documents(docs, max_doc_chars=max_doc_chars)}
    return {"messages": [*prompt, reply], "mode": "noisy" if noisy else "useful"}


def _unrelated(pool: Sequence[Doc], own: Sequence[Doc], answers: Sequence[str]) -> list[Doc]:
    """Passages of ``pool`` that are not among ``own`` and mention none of ``answers``."""
    own_ids = {d.id for d in own}
    needles = [a.casefold() for a in answers if a.strip()]
    return [
        d
        for d in pool
        if d.id not in own_ids and not any(n in f"{d.title} {d.text}".casefold() for n in needles)
    ]


@dataclass
class SimulatorSFTConfig:
    """Settings of one fine-tuning run."""

    out: str | Path
    """Directory the fine-tuned model and tokenizer are saved to (loadable by `HFPolicy`)."""
    model: str = DEFAULT_MODEL
    """Model to start from: a hub id, a local directory or the alias ``smollm2-135m-instruct``."""
    steps: int = 50
    """Optimizer steps (passes over the rows repeat, reshuffled, as many times as they need)."""
    batch_size: int = 4
    """Examples per step."""
    learning_rate: float = 5e-5
    """Peak learning rate (linear decay to 0 over ``steps``)."""
    max_length: int = 1536
    """Longest token stream (prompt and reply); longer ones lose their end."""
    seed: int = 0
    """Seed of the data order."""
    show_progress: bool = True
    """Show progress bars: the model's download and loading, the SFT steps (off in tests and logs)."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        value = self.max_length
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise ConfigError(f"max_length must be an integer >= 2, got {value!r}")
        if not self.learning_rate > 0:
            raise ConfigError(f"learning_rate must be positive, got {self.learning_rate!r}")
        self.out = Path(self.out)


@dataclass
class SFTResult:
    """What a run left: where the model is, and the training loss of every step."""

    out: Path
    losses: list[float] = field(default_factory=list)


def train_simulator(rows: Sequence[dict[str, Any]], cfg: SimulatorSFTConfig) -> SFTResult:
    """Fine-tune ``cfg.model`` on ``rows`` (from `simulator_examples`) with the warm start's `sft`
    on `simulator_trajectories`, on the GPU with bfloat16 autocast where there is one, and save
    it, with its tokenizer, to ``cfg.out``."""
    if not rows:
        raise ConfigError("no training rows; build them with simulator_examples")
    with _quiet(cfg.show_progress):
        path = resolve_model(cfg.model, show_progress=cfg.show_progress)
        tokenizer = AutoTokenizer.from_pretrained(path)
        if not tokenizer.chat_template:
            raise ConfigError(f"{cfg.model!r} has no chat template; start from an instruct (chat) model")
        trajectories = simulator_trajectories(rows, tokenizer)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    cuda = torch.cuda.is_available()
    bf16 = cuda and torch.cuda.is_bf16_supported()
    if cuda:
        model.to("cuda")
    autocast = (
        functools.partial(torch.autocast, "cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext
    )
    logger.info(
        "fine-tuning %s on %s, %s", cfg.model, model.device, "bfloat16 autocast" if bf16 else "float32"
    )
    losses = sft(
        model,
        trajectories,
        lr=cfg.learning_rate,
        max_steps=cfg.steps,
        batch_size=cfg.batch_size,
        max_len=cfg.max_length,
        seed=cfg.seed,
        autocast=autocast,
        progress=cfg.show_progress,
    )
    with _quiet(cfg.show_progress):
        model.save_pretrained(cfg.out)
        tokenizer.save_pretrained(cfg.out)
    return SFTResult(cfg.out, losses)


def simulator_trajectories(rows: Sequence[dict[str, Any]], tokenizer: Any) -> list[Trajectory]:
    """Each row's conversation as the token stream `sft` trains on: ``prompt_ids`` are its
    prompt as `Simulated` sends it through a policy's ``chat`` (``tokenizer``'s chat template
    with the generation prompt, as `TokenizedPolicy.apply_chat_template` renders it), ``ids`` the
    reply as the template writes the assistant's turn, up to and including the end-of-sequence
    token that ends generation (so the model learns to stop), all with mask 1."""
    return [_trajectory(row["messages"], tokenizer) for row in rows]


def _trajectory(messages: Sequence[Message], tokenizer: Any) -> Trajectory:
    *prompt, reply = messages
    if reply["role"] != "assistant":
        raise ConfigError(
            f"a training row ends with the simulator's (assistant's) reply, not a {reply['role']!r} message"
        )
    prompt_ids = tokenizer.apply_chat_template(
        prompt, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    head = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(list(messages), tokenize=False)
    if not full.startswith(head):
        raise ConfigError(
            "the chat template renders the prompt differently when a reply follows it, so the reply's "
            "tokens cannot be cut out of the conversation's; use a model with another template"
        )
    turn, eos = full[len(head) :], tokenizer.eos_token
    end = turn.rfind(eos) if eos else -1
    turn = turn[: end + len(eos)] if end >= 0 else turn.rstrip()  # what follows the end is not generated
    ids = list(tokenizer.encode(turn, add_special_tokens=False))
    return Trajectory(list(prompt_ids), ids, [1] * len(ids), [0.0] * len(ids), [len(ids)], [0])


@contextlib.contextmanager
def _quiet(show: bool) -> Iterator[None]:
    """Hide transformers' progress bars (loading and saving a model) unless asked, and restore
    their previous state after."""
    was = transformers_logging.is_progress_bar_enabled()
    if not show:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was and not show:
            transformers_logging.enable_progress_bar()
