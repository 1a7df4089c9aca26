"""`Simulated` (ZeroSearch): a scripted fake generator for prompts, draws, parsing and the cache;
one run of a real SearchEnv with a random tiny Llama behind `HFPolicy`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from searchgym.errors import ConfigError, PolicyError, RetrieverError
from searchgym.generation import Completion, SamplingParams
from searchgym.retrievers import Doc, Retriever
from searchgym.retrievers.base import ContextualRetriever, SearchContext
from searchgym.retrievers.simulated import (
    NoiseCurriculum,
    Simulated,
    format_documents,
    noise_probability,
    parse_documents,
    simulator_messages,
)

REPO = Path(__file__).resolve().parents[2]
CONTEXT = SearchContext("Who was the employer of Jomis Britard?", ("Seivix Company", "Seivix"))


def reply_by_mode(prompt: str) -> str:
    """Two documents naming the mode the prompt asked for and its query."""
    mode = "noisy" if "must be noisy" in prompt else "useful"
    query = prompt.rsplit("Query: ", 1)[1]
    return f"Doc 1 (Title: {mode}): {mode} text about {query}\nDoc 2 (Title: more): more {mode} {query}"


class ScriptedGenerator:
    """Answers each prompt with ``reply(prompt)``; records every call's prompts."""

    def __init__(self, reply=reply_by_mode) -> None:
        self.reply = reply
        self.calls: list[list[str]] = []

    def chat(self, conversations, params):
        prompts = [conv[-1]["content"] for conv in conversations]
        self.calls.append(prompts)
        return [Completion(text=self.reply(p)) for p in prompts]

    @property
    def prompts(self) -> list[str]:
        return [p for call in self.calls for p in call]


# -- the curriculum ------------------------------------------------------------------------------
def formula(i, m, p_s=0.0, p_e=0.5, b=4.0):
    return p_s + (b ** (i / m) - 1) / (b - 1) * (p_e - p_s)


@pytest.mark.parametrize("m", [1, 10, 400])
def test_noise_probability_follows_zerosearch_formula(m):
    for i in (0, m // 2, m):
        assert noise_probability(i, m) == pytest.approx(formula(i, m))
    assert noise_probability(0, m) == 0.0 and noise_probability(m, m) == pytest.approx(0.5)
    assert noise_probability(3 * m, m) == pytest.approx(0.5)  # past the end it stays at p_end


def test_curriculum_by_hand_and_other_settings():
    assert noise_probability(50, 100) == pytest.approx((2 - 1) / 3 * 0.5)  # 4**0.5 = 2
    c = NoiseCurriculum(total_steps=10, p_start=0.1, p_end=0.7, base=2.0)
    assert c.probability(3) == pytest.approx(formula(3, 10, 0.1, 0.7, 2.0))
    assert NoiseCurriculum(total_steps=4, base=1.0).probability(1) == pytest.approx(0.125)  # linear limit


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(total_steps=0), "total_steps"),
        (dict(total_steps=10, p_end=1.5), "p_end"),
        (dict(total_steps=10, base=0.0), "base"),
    ],
)
def test_bad_curriculum_is_a_config_error(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        NoiseCurriculum(**kwargs)


# -- parsing -------------------------------------------------------------------------------------
def texts(output: str, k: int = 5, **kwargs) -> list[tuple[str, str]]:
    return [(d.title, d.text) for d in parse_documents(output, "q", k, **kwargs)]


def test_parses_the_format_the_prompt_asks_for_and_drops_preamble():
    output = "Sure! Here they are:\nDoc 1 (Title: Paris): Capital of France.\nDoc 2 (Title: Lyon): A city."
    assert texts(output) == [("Paris", "Capital of France."), ("Lyon", "A city.")]  # fewer than asked


def test_keeps_only_k_documents():
    output = "\n".join(f"Doc {i} (Title: t{i}): text number {i}" for i in range(1, 8))
    assert [t for t, _ in texts(output, k=3)] == ["t1", "t2", "t3"]


@pytest.mark.parametrize(
    "output",
    [
        "Doc 1(Title: Alpha) first text\nDoc 2(Title: Beta) second text",  # Search-R1's layout
        "**Doc 1 (Title: Alpha)**: first text\n**Doc 2 (Title: Beta)**: second text",
        "Document 1: Title: Alpha\nfirst text\n\nDocument 2: Title: Beta\nsecond text",
        "- Doc #1 (Title: Alpha) - first text\n- Doc #2 (Title: Beta) - second text",
        "[1] (Title: Alpha): first text\n[2] (Title: Beta): second text",
        "Doc 1 (Title: Alpha): first text Doc 2 (Title: Beta): second text",  # all on one line
    ],
)
def test_numbering_and_title_variants(output):
    assert texts(output) == [("Alpha", "first text"), ("Beta", "second text")]


def test_documents_without_titles():
    assert texts("1. first text\n2) second text\nDoc3: third text") == [
        ("", "first text"),
        ("", "second text"),
        ("", "third text"),
    ]


def test_titles_keep_their_own_parentheses():
    output = "Doc 1 (Title: Neric Braelworth (career)): By profession a sculptor."
    assert texts(output) == [("Neric Braelworth (career)", "By profession a sculptor.")]


@pytest.mark.parametrize("output", ["", "   \n\t", "!!! ### ... 42", "<|im_end|>", "Doc 1 (Title: x): ..."])
def test_empty_or_garbage_output_gives_no_documents(output):
    assert parse_documents(output, "q", 5) == []


def test_an_unstructured_blob_is_one_document():
    blob = "Paris is the capital of France.\nIt lies on the Seine.\n\nIn 2020. it had 2.1 million people."
    assert texts(blob) == [
        ("", "Paris is the capital of France. It lies on the Seine. In 2020. it had 2.1 million people.")
    ]


def test_overlong_documents_are_cut_on_a_word_boundary():
    words = " ".join(f"word{i}" for i in range(200))
    [(_, text)] = texts(f"Doc 1 (Title: long): {words}", max_doc_chars=100)
    assert len(text) <= 100 and words.startswith(text) and words[len(text)] == " "


def test_duplicates_are_dropped_and_protocol_tags_kept():
    output = (
        "Doc 1: Paris is big.\nDoc 2: paris  is BIG.\n"
        "Doc 3: See <answer>Lyon</answer> and <search>x</search>.<|im_end|>"
    )
    assert texts(output) == [("", "Paris is big."), ("", "See <answer>Lyon</answer> and <search>x</search>.")]


def test_ids_are_stable_hashes_of_query_and_text_and_scores_fall_with_rank():
    output = "Doc 1: alpha text\nDoc 2: beta text\nDoc 3: gamma text"
    docs = parse_documents(output, "q", 5)
    assert [d.id for d in docs] == [d.id for d in parse_documents(output, "q", 5)]
    assert all(d.id.startswith("sim-") for d in docs) and len({d.id for d in docs}) == 3
    assert parse_documents(output, "other query", 5)[0].id != docs[0].id
    assert parse_documents("Doc 1 (Title: new): alpha text", "q", 5)[0].id == docs[0].id  # title aside
    assert [d.score for d in docs] == sorted((d.score for d in docs), reverse=True)
    assert len({d.score for d in docs}) == 3


def test_formatted_documents_parse_back():
    from searchgym.tasks.world import load_world

    passages = load_world(seed=0, n_passages=300).passages[:5]
    docs = [Doc(p["id"], p["title"], p["text"]) for p in passages]
    parsed = parse_documents(format_documents(docs, max_doc_chars=600), "q", 5, max_doc_chars=600)
    assert [(d.title, d.text) for d in parsed] == [(d.title, " ".join(d.text.split())[:600]) for d in docs]


# -- prompts and draws ---------------------------------------------------------------------------
def test_prompt_shows_query_question_and_answers_in_context_and_the_query_alone_without():
    gen = ScriptedGenerator()
    sim = Simulated(gen)
    docs = sim.search_in_context("Jomis Britard employer", 3, CONTEXT)
    sim.search("Jomis Britard employer", 3)
    with_context, alone = gen.prompts
    for text in ("Query: Jomis Britard employer", CONTEXT.question, "Seivix Company", "Doc 5 (Title:"):
        assert text in with_context
    assert (
        "Query: Jomis Britard employer" in alone and CONTEXT.question not in alone and "Seivix" not in alone
    )
    assert [d.title for d in docs] == ["useful", "more"]
    assert isinstance(sim, Retriever) and isinstance(sim, ContextualRetriever)


def test_useful_and_noisy_prompts_differ_as_zerosearch_asks():
    useful = simulator_messages("q", 5, noisy=False, context=CONTEXT)[0]["content"]
    noisy = simulator_messages("q", 5, noisy=True, context=CONTEXT)[0]["content"]
    assert "must be useful" in useful and "must be noisy" in noisy
    assert "none of them may contain or imply the correct answer" in noisy


@pytest.mark.parametrize("noise, expected", [(0.0, False), (1.0, True)])
def test_constant_noise_zero_and_one(noise, expected):
    gen = ScriptedGenerator()
    sim = Simulated(gen, noise=noise)
    results = sim.batch_search([f"q{i}" for i in range(20)], 2)
    assert sim.last_noisy == [expected] * 20 and sim.n_noisy == 20 * expected
    assert all(r[0].title == ("noisy" if expected else "useful") for r in results)


def test_draws_follow_the_seeded_generator_and_the_curriculum_step():
    before = np.random.get_state()[1].copy()
    gen = ScriptedGenerator()
    sim = Simulated(gen, noise=NoiseCurriculum(total_steps=100), seed=7)
    queries = [f"query {i}" for i in range(300)]
    sim.batch_search_in_context(queries, 2, [CONTEXT] * len(queries))
    assert sim.noise_probability == 0.0 and sim.n_noisy == 0
    sim.set_step(100)
    assert sim.noise_probability == pytest.approx(0.5)
    results = sim.batch_search_in_context(queries, 2, [CONTEXT] * len(queries))
    rng = np.random.default_rng(7)
    rng.random(300)  # the first call's draws
    expected = list(rng.random(300) < 0.5)
    assert sim.last_noisy == expected and sim.n_noisy == sum(expected) and sim.n_searches == 600
    assert 100 < sum(expected) < 200
    for prompt, docs, noisy in zip(gen.calls[-1], results, expected):
        assert ("must be noisy" in prompt) == noisy and docs[0].title == ("noisy" if noisy else "useful")
    assert (np.random.get_state()[1] == before).all()  # global random state untouched


def test_batch_search_is_one_call_and_equals_single_searches():
    queries = ["alpha", "beta", "gamma"]
    batch_gen, single_gen = ScriptedGenerator(), ScriptedGenerator()
    batch = Simulated(batch_gen, noise=0.5, seed=3).batch_search(queries, 2)
    single_sim = Simulated(single_gen, noise=0.5, seed=3)
    assert batch == [single_sim.search(q, 2) for q in queries]
    assert len(batch_gen.calls) == 1 and len(batch_gen.calls[0]) == 3


def test_asks_for_k_docs_and_returns_k():
    gen = ScriptedGenerator(lambda p: "\n".join(f"Doc {i}: text {i}" for i in range(1, 9)))
    sim = Simulated(gen, k_docs=5)
    assert len(sim.search("q", 3)) == 3 and "Doc 5 (Title:" in gen.prompts[-1]
    assert len(sim.search("q", 7)) == 7 and "Doc 7 (Title:" in gen.prompts[-1]


def test_blank_query_returns_nothing_without_generating():
    gen = ScriptedGenerator()
    assert Simulated(gen).batch_search(["", "  "], 3) == [[], []] and gen.calls == []


def test_doc_returns_generated_documents():
    sim = Simulated(ScriptedGenerator())
    docs = sim.search("q", 2)
    assert sim.doc(docs[1].id) == docs[1] and sim.doc("sim-unknown") is None


def test_generator_failure_is_a_retriever_error():
    def down(prompt):
        raise PolicyError("server at http://localhost:1 refused")

    with pytest.raises(RetrieverError, match="refused"):
        Simulated(ScriptedGenerator(down)).search("q", 3)

    class Short(ScriptedGenerator):
        def chat(self, conversations, params):
            return super().chat(conversations, params)[:-1]

    with pytest.raises(RetrieverError, match="1 of 2"):
        Simulated(Short()).batch_search(["a", "b"], 3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(noise=1.5), "noise"),
        (dict(k_docs=0), "k_docs"),
        (dict(max_doc_chars=5), "max_doc_chars"),
        (dict(cache="x.sqlite"), "namespace"),
    ],
)
def test_bad_arguments_are_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Simulated(ScriptedGenerator(), **kwargs)
    with pytest.raises(ConfigError, match="chat"):
        Simulated(object())
    with pytest.raises(ConfigError, match="step"):
        Simulated(ScriptedGenerator()).set_step(-1)


# -- the cache -----------------------------------------------------------------------------------
def test_cache_is_shared_by_two_instances_and_keyed_by_mode_context_and_namespace(tmp_path):
    path = tmp_path / "sim.sqlite"
    first_gen, second_gen = ScriptedGenerator(), ScriptedGenerator()
    first = Simulated(first_gen, cache=path, namespace="tiny")
    expected = first.batch_search_in_context(["a", "b"], 2, [CONTEXT, None])
    second = Simulated(second_gen, cache=path, namespace="tiny")
    assert second.batch_search_in_context(["a", "b"], 2, [CONTEXT, None]) == expected
    assert second_gen.calls == [] and (second.hits, second.misses) == (2, 0)

    second.search_in_context("a", 2, SearchContext(CONTEXT.question, ("other",)))  # other answers
    Simulated(ScriptedGenerator(), noise=1.0, cache=path, namespace="tiny").search("b", 2)  # noisy mode
    other_ns = Simulated(ScriptedGenerator(), cache=path, namespace="other-model")
    other_ns.search("b", 2)
    assert len(second_gen.calls) == 1 and (other_ns.hits, other_ns.misses) == (0, 1)
    first.close()
    second.close()


def test_cache_is_shared_across_processes(tmp_path):
    path = tmp_path / "sim.sqlite"
    script = textwrap.dedent(
        f"""
        from searchgym.generation import Completion
        from searchgym.retrievers.simulated import Simulated

        class Gen:
            def chat(self, conversations, params):
                reply = Completion(text="Doc 1 (Title: t): written by the other process")
                return [reply] * len(conversations)

        Simulated(Gen(), cache={str(path)!r}, namespace="tiny").search("shared query", 3)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO)
    gen = ScriptedGenerator()
    docs = Simulated(gen, cache=path, namespace="tiny").search("shared query", 3)
    assert [d.text for d in docs] == ["written by the other process"] and gen.calls == []


# -- a real SearchEnv with a tiny model ----------------------------------------------------------
class Recording:
    """Wraps a generator and keeps the conversations it was asked to complete."""

    def __init__(self, inner) -> None:
        self.inner, self.conversations = inner, []

    def chat(self, conversations, params):
        self.conversations.extend(conversations)
        return self.inner.chat(conversations, params)


def test_search_env_with_a_tiny_llama_simulator(tmp_path, tiny_llama_dir):
    from searchgym.agents.policies.hf import HFPolicy
    from searchgym.envs.factories import search_env
    from searchgym.tasks.world import load_world

    tasks = load_world(seed=0, n_passages=300).tasks("dev")
    policy = Recording(HFPolicy(str(tiny_llama_dir), device="cpu"))
    sim = Simulated(policy, params=SamplingParams(max_new_tokens=24, temperature=0.0))
    env = search_env(tasks, sim)
    task = tasks[0]
    env.reset(seed=0, options={"task": task})
    obs, _, terminated, _, info = env.step("<search>Jomis Britard employer</search>")
    prompt = policy.conversations[0][-1]["content"]
    assert task.question in prompt and task.answers[0] in prompt and "Query: Jomis Britard employer" in prompt
    assert not terminated and info["error"] is None and "<information>" in obs
    assert all(i.startswith("sim-") for i in info["doc_ids"]) and len(info["doc_ids"]) <= 3
    for doc_id in info["doc_ids"]:
        assert sim.doc(doc_id).text[:40] in obs
    if not info["doc_ids"]:
        assert "No results found." in obs
    _, reward, terminated, _, info = env.step(f"<answer>{task.answers[0]}</answer>")
    assert terminated and info["em"] == 1.0 and reward > 0
