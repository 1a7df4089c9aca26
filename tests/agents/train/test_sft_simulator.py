"""The SFT recipe that makes a simulator: training rows from a real retriever, a few trl steps on
the tiny random Llama, and the saved model used by `Simulated` through `HFPolicy`."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from searchgym.agents.policies.hf import HFPolicy
from searchgym.agents.train.sft_simulator import (
    SimQuery,
    SimulatorSFTConfig,
    corpus_queries,
    simulator_examples,
    simulator_trainer,
    train_simulator,
    world_queries,
)
from searchgym.errors import ConfigError
from searchgym.generation import SamplingParams
from searchgym.retrievers import BM25, Doc
from searchgym.retrievers.base import SearchContext
from searchgym.retrievers.simulated import Simulated, parse_documents, simulator_messages
from searchgym.tasks.world import load_world

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def world():
    return load_world(seed=0, n_passages=300)


@pytest.fixture(scope="module")
def bm25(world):
    return BM25.build([Doc(p["id"], p["title"], p["text"]) for p in world.passages])


def test_world_queries_are_the_hop_queries_with_their_question_and_answers(world):
    queries = world_queries(world, "train")
    task = world.tasks("train")[0]
    first = queries[0]
    assert first.query == task.metadata["chain"][0]["query"]
    assert first.context.question == task.question and first.context.answers == task.answers
    assert len(set(queries)) == len(queries) >= len(world.tasks("train"))


def test_corpus_queries_are_sampled_titles(world):
    docs = [Doc(p["id"], p["title"], p["text"]) for p in world.passages]
    queries = corpus_queries(docs, 10, seed=1)
    assert len(queries) <= 10 and all(q.context is None for q in queries)
    assert {q.query for q in queries} <= {d.title for d in docs}
    assert queries == corpus_queries(docs, 10, seed=1) != corpus_queries(docs, 10, seed=2)


def test_useful_targets_are_the_retrievers_top_k_in_the_simulator_format(world, bm25):
    queries = world_queries(world, "train")[:20]
    rows = simulator_examples(queries, bm25, k=3, seed=0)
    useful = [r for r in rows if r["mode"] == "useful"]
    assert len(useful) == 20
    for q, row in zip(queries, useful):
        prompt, reply = row["messages"]
        assert [prompt] == simulator_messages(
            q.query, 3, noisy=False, context=q.context
        )  # what Simulated sends
        assert reply["role"] == "assistant"
        parsed = parse_documents(reply["content"], q.query, 3)
        assert [(d.title, d.text) for d in parsed] == [(d.title, d.text) for d in bm25.search(q.query, 3)]


def test_noisy_targets_come_from_other_queries_and_never_hold_the_answer(world, bm25):
    queries = world_queries(world, "train")[:30]
    rows = simulator_examples(queries, bm25, k=3, seed=0)
    noisy = [r for r in rows if r["mode"] == "noisy"]
    assert noisy, "every query should find unrelated passages in a 300-passage world"
    by_prompt = {
        simulator_messages(q.query, 3, noisy=True, context=q.context)[0]["content"]: q for q in queries
    }
    for row in noisy:
        prompt, reply = row["messages"]
        q = by_prompt[prompt["content"]]
        own = {(d.title, d.text) for d in bm25.search(q.query, 3)}
        for d in parse_documents(reply["content"], q.query, 3):
            assert (d.title, d.text) not in own
            assert not any(a.casefold() in f"{d.title} {d.text}".casefold() for a in q.context.answers)
    assert rows == simulator_examples(queries, bm25, k=3, seed=0)  # seeded


def test_examples_need_queries_that_find_something(bm25):
    with pytest.raises(ConfigError, match="no queries"):
        simulator_examples([], bm25)
    with pytest.raises(ConfigError, match="found nothing"):
        simulator_examples([SimQuery("zzqx qqzx")], bm25)


def test_config_errors_say_what_to_fix(tmp_path):
    with pytest.raises(ConfigError, match="steps"):
        SimulatorSFTConfig(out=tmp_path, steps=0)
    with pytest.raises(ConfigError, match="learning_rate"):
        SimulatorSFTConfig(out=tmp_path, learning_rate=0.0)


def test_the_loss_covers_the_simulators_reply_only(tiny_llama_dir, world, bm25, tmp_path):
    rows = simulator_examples(world_queries(world, "train")[:2], bm25, k=2, seed=0)
    cfg = SimulatorSFTConfig(out=tmp_path / "sim", model=str(tiny_llama_dir), steps=1, show_progress=False)
    trainer = simulator_trainer(rows, cfg)
    tokenizer = trainer.processing_class
    for row, example in zip(rows, trainer.train_dataset):
        trained = [t for t, label in zip(example["input_ids"], example["labels"]) if label != -100]
        assert tokenizer.decode(trained) == row["messages"][-1]["content"] + "<|im_end|>\n"


def test_sft_steps_change_the_model_and_it_works_as_a_simulator(tiny_llama_dir, world, bm25, tmp_path):
    rows = simulator_examples(world_queries(world, "train")[:8], bm25, k=2, seed=0)
    cfg = SimulatorSFTConfig(
        out=tmp_path / "sim",
        model=str(tiny_llama_dir),
        steps=2,
        batch_size=2,
        learning_rate=1e-3,
        max_length=768,
        show_progress=False,
    )
    result = train_simulator(rows, cfg)
    assert len(result.losses) == 2 and all(math.isfinite(x) for x in result.losses)
    before = load_file(tiny_llama_dir / "model.safetensors")
    after = load_file(result.out / "model.safetensors")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[name], after[name]) for name in before)

    task = world.tasks("dev")[0]
    policy = HFPolicy(str(result.out), device="cpu")
    sim = Simulated(policy, params=SamplingParams(max_new_tokens=24, temperature=0.0))
    query = task.metadata["chain"][0]["query"]
    docs = sim.search_in_context(query, 3, SearchContext(task.question, task.answers))
    assert len(docs) <= 3 and all(d.id.startswith("sim-") for d in docs) and sim.n_searches == 1


def _script():
    spec = importlib.util.spec_from_file_location(
        "sft_simulator_script", REPO / "data_scripts" / "sft_simulator.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_cli_trains_and_saves(tiny_llama_dir, tmp_path, capsys):
    out = tmp_path / "cli"
    argv = ["--model", str(tiny_llama_dir), "--world-passages", "300", "--queries", "4", "--out", str(out)]
    argv += ["--steps", "1", "--batch-size", "1", "--max-length", "512", "--no-progress"]
    assert _script().main(argv) == 0
    assert "trained 1 steps on 8 examples (4 noisy) from 4 queries" in capsys.readouterr().out
    assert (out / "config.json").is_file()
    rows = [json.loads(line) for line in (out / "sft_examples.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and {r["mode"] for r in rows} == {"useful", "noisy"}


def test_cli_reports_a_missing_corpus(tmp_path, capsys):
    argv = ["--corpus", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o"), "--no-progress"]
    assert _script().main(argv) == 1
    assert "missing.jsonl" in capsys.readouterr().err
