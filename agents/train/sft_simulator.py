"""Supervised fine-tuning that turns a small model into a search simulator (ZeroSearch).

Training pairs come from a real corpus: for each sampled query, the *useful* target is what a
real retriever (BM25) returns for it and the *noisy* target is passages retrieved for other,
unrelated queries (none mentioning the gold answer). Prompts are exactly the ones `Simulated`
sends and targets are written with `format_documents`, the format its parser reads, so the
fine-tuned model drops straight into `Simulated`. Training is trl's `SFTTrainer` on the
conversational format, with the loss on the simulator's reply only.

    rows = simulator_examples(world_queries(load_world(seed=0)), BM25.build(docs))
    result = train_simulator(rows, SimulatorSFTConfig(model="smollm2-135m-instruct", out="runs/sim"))
    Simulated(HFPolicy("runs/sim"))
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.agents.policies.models import DEFAULT_MODEL, resolve_model
from searchgym.errors import ConfigError
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
    """Optimizer steps."""
    batch_size: int = 4
    """Examples per step."""
    learning_rate: float = 5e-5
    """Peak learning rate (linear decay to 0 over ``steps``)."""
    max_length: int = 1536
    """Longest tokenised example; longer ones lose their end."""
    seed: int = 0
    """Seed of the data order and of trl's initialisation."""
    show_progress: bool = True
    """Show trl's progress bars (off in tests and logs)."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "max_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not self.learning_rate > 0:
            raise ConfigError(f"learning_rate must be positive, got {self.learning_rate!r}")
        self.out = Path(self.out)


@dataclass
class SFTResult:
    """What a run left: where the model is, and the training loss logged at every step."""

    out: Path
    losses: list[float] = field(default_factory=list)
    assistant_only_loss: bool = False


def train_simulator(rows: Sequence[dict[str, Any]], cfg: SimulatorSFTConfig) -> SFTResult:
    """Fine-tune ``cfg.model`` on ``rows`` (from `simulator_examples`) with trl's SFTTrainer and
    save it, with its tokenizer, to ``cfg.out``."""
    with _quiet(cfg.show_progress):
        trainer = simulator_trainer(rows, cfg)
        trainer.train()
        trainer.save_model(str(cfg.out))
        trainer.processing_class.save_pretrained(str(cfg.out))
    losses = [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]
    return SFTResult(cfg.out, losses, trainer.args.assistant_only_loss)


def simulator_trainer(rows: Sequence[dict[str, Any]], cfg: SimulatorSFTConfig) -> Any:
    """The `trl.SFTTrainer` `train_simulator` runs, ready to train.

    The loss covers the simulator's reply only: with ``assistant_only_loss`` where the chat
    template has (or trl can add) ``{% generation %}`` markers, else by handing trl each row as a
    conversational prompt/completion pair, which masks the prompt the same way (SmolLM2's template
    is of the second kind).
    """
    if not rows:
        raise ConfigError("no training rows; build them with simulator_examples")
    with _quiet(cfg.show_progress):
        return _build_trainer(rows, cfg)


def _build_trainer(rows: Sequence[dict[str, Any]], cfg: SimulatorSFTConfig) -> Any:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    path = resolve_model(cfg.model, show_progress=cfg.show_progress)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if not tokenizer.chat_template:
        raise ConfigError(f"{cfg.model!r} has no chat template; start from an instruct (chat) model")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    assistant_only = _supports_assistant_masks(tokenizer)
    data = [{"messages": r["messages"]} if assistant_only else _prompt_completion(r) for r in rows]
    cuda = torch.cuda.is_available()
    args = SFTConfig(
        output_dir=str(cfg.out),
        max_steps=cfg.steps,
        per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="linear",
        max_length=cfg.max_length,
        assistant_only_loss=assistant_only,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=cfg.seed,
        data_seed=cfg.seed,
        use_cpu=not cuda,
        bf16=cuda and torch.cuda.is_bf16_supported(),
        disable_tqdm=not cfg.show_progress,
    )
    dataset = Dataset.from_list(data)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    trainer.remove_callback(PrinterCallback)  # library code does not print; losses are returned
    return trainer


def _supports_assistant_masks(tokenizer: Any) -> bool:
    """Whether trl can mask everything but the assistant's turns with this chat template."""
    from trl.chat_template_utils import get_training_chat_template

    try:
        get_training_chat_template(tokenizer)
    except ValueError:  # trl has no training version of this template
        return False
    return True


def _prompt_completion(row: dict[str, Any]) -> dict[str, Any]:
    messages = row["messages"]
    return {"prompt": messages[:-1], "completion": messages[-1:]}


@contextlib.contextmanager
def _quiet(show: bool) -> Iterator[None]:
    """Hide the progress bars of transformers (loading) and datasets (trl's tokenisation) unless
    asked, and restore their previous state after."""
    import datasets.utils as ds
    from transformers.utils import logging as tf

    was = ds.is_progress_bar_enabled(), tf.is_progress_bar_enabled()
    if not show:
        ds.disable_progress_bars()
        tf.disable_progress_bar()
    try:
        yield
    finally:
        if was[0] and not show:
            ds.enable_progress_bars()
        if was[1] and not show:
            tf.enable_progress_bar()
