"""The SFT recipe that makes a simulator: training rows from a real retriever, their token streams
(the prompt `Simulated` sends, then the reply), a few steps of the warm start's `sft` on the tiny
random Llama, and the saved model used by `Simulated` through `HFPolicy`."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from searchgym.agents.policies.hf import HFPolicy
from searchgym.agents.train.sft_simulator import (
    SimQuery,
    SimulatorSFTConfig,
    corpus_queries,
    simulator_examples,
    simulator_trajectories,
    train_simulator,
    world_queries,
)
from searchgym.agents.train.warm_start import sft
from searchgym.errors import ConfigError
from searchgym.generation import Completion, SamplingParams
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
    with pytest.raises(ConfigError, match="max_length must be an integer >= 2"):
        SimulatorSFTConfig(out=tmp_path, max_length=1)


def test_the_loss_covers_the_simulators_reply_only(tiny_llama_dir, world, bm25):
    rows = simulator_examples(world_queries(world, "train")[:2], bm25, k=2, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    streams = simulator_trajectories(rows, tokenizer)
    assert len(streams) == len(rows) == 4
    for row, stream in zip(rows, streams):
        # sft learns the mask-1 tokens of ids, never the prompt's: the reply and its end of turn
        assert stream.mask == [1] * len(stream.ids)
        assert tokenizer.decode(stream.ids) == row["messages"][-1]["content"] + "<|im_end|>"
        assert stream.ids[-1] == tokenizer.eos_token_id  # where generation stops: the model learns to stop
        # prompt and reply are the whole conversation, less the newline the template writes after the turn
        whole = tokenizer.apply_chat_template(row["messages"], tokenize=False)
        assert tokenizer.decode(stream.prompt_ids + stream.ids) + "\n" == whole


def test_the_prompt_trained_on_is_the_one_simulated_sends(tiny_llama_dir, world, bm25):
    rows = simulator_examples(world_queries(world, "train")[:3], bm25, k=2, seed=0)
    streams = simulator_trajectories(rows, AutoTokenizer.from_pretrained(tiny_llama_dir))
    policy = HFPolicy(str(tiny_llama_dir), device="cpu")
    sent: list[list[int]] = []

    def generate(prompts, params):  # what reaches the model from Simulated through policy.chat
        sent.extend(list(p) for p in prompts)
        return [Completion("Doc 1 (Title: t): some text.", [], [], "stop") for _ in prompts]

    policy.generate = generate
    queries = {
        simulator_messages(q.query, 2, noisy=n, context=q.context)[0]["content"]: q
        for q in world_queries(world, "train")[:3]
        for n in (False, True)
    }
    for row, stream in zip(rows, streams):
        q = queries[row["messages"][0]["content"]]
        sim = Simulated(policy, k_docs=2, noise=float(row["mode"] == "noisy"))
        sim.search_in_context(q.query, 2, q.context)
        assert sim.last_noisy == [row["mode"] == "noisy"]
        assert sent.pop() == stream.prompt_ids


def test_steps_are_optimizer_steps_over_repeated_passes(tiny_llama_dir, world, bm25):
    rows = simulator_examples(world_queries(world, "train")[:2], bm25, k=2, seed=0)
    streams = simulator_trajectories(rows, AutoTokenizer.from_pretrained(tiny_llama_dir))
    runs = []
    for options in ({"epochs": 2}, {"max_steps": 4}, {"max_steps": 3}):  # 4 streams, 2 per step
        model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)
        runs.append(sft(model, streams, lr=1e-3, batch_size=2, max_len=768, **options))
    assert runs[0] == runs[1] and len(runs[2]) == 3  # 2 whole passes are 2 epochs, to the bit
    with pytest.raises(ConfigError, match="give epochs \\(2\\) or max_steps \\(4\\), not both"):
        sft(model, streams, epochs=2, max_steps=4)
    with pytest.raises(ConfigError, match="max_steps must be a positive integer"):
        sft(model, streams, max_steps=0)


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
