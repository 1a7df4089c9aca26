"""`VLLMPolicy` on a CPU machine: the import guard, and a fake ``vllm`` module that records what
the policy asks of the engine and answers the way vLLM does (stop string kept in the text, the
sampled token's log-prob among the returned ones, EOS in the token ids)."""

import dataclasses
import pickle
import sys
import types
from typing import TypedDict

import pytest
import torch
from transformers import AutoTokenizer

import searchgym
from searchgym.agents import run_episodes
from searchgym.agents.policies import vllm as module
from searchgym.agents.policies.agent import PolicyAgent
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.policies.models import resolve_tokenizer
from searchgym.agents.policies.openai import request_seed
from searchgym.agents.policies.vllm import VLLMPolicy
from searchgym.errors import DependencyNotInstalled, PolicyError


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(resolve_tokenizer("smollm2-135m-instruct"))


@dataclasses.dataclass
class Logprob:
    logprob: float
    rank: int


class SamplingParamsRecord:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


@dataclasses.dataclass
class EngineArgs:  # vLLM 0.10.2+ has logprobs_mode
    model: str = ""
    logprobs_mode: str = "raw_logprobs"


@dataclasses.dataclass
class OldEngineArgs:
    model: str = ""


class TokensPrompt(TypedDict):
    prompt_token_ids: list[int]


class FakeModel:
    def __init__(self):
        self.loaded = []

    def load_weights(self, weights):
        self.loaded.extend(weights)


class FakeLLM:
    """Records its construction and calls; answers from ``script`` (texts, one per prompt)."""

    tokenizer = None
    script: list[str] = []
    instances: list = []

    def __init__(self, **kwargs):
        self.kwargs, self.calls, self.resets = kwargs, [], 0
        FakeLLM.instances.append(self)

    def get_tokenizer(self):
        return self.tokenizer

    def reset_prefix_cache(self):
        self.resets += 1

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        self.calls.append(
            {"prompts": prompts, "sampling": [s.kwargs for s in sampling_params], "tqdm": use_tqdm}
        )
        return [self._output(p, s.kwargs) for p, s in zip(prompts, sampling_params)]

    def _output(self, prompt, sampling):
        text, tok = self.script.pop(0), self.tokenizer
        ids = tok.encode(text, add_special_tokens=False)
        finish = "stop"
        stops = [(text.find(s) + len(s), s) for s in sampling["stop"] if s in text]
        if stops:  # generation ends on the token that completes the stop string
            end = min(stops)[0]
            n = next(n for n in range(1, len(ids) + 1) if len(tok.decode(ids[:n])) >= end)
            ids, text = ids[:n], text[:end]
        elif len(ids) >= sampling["max_tokens"]:
            ids, finish = ids[: sampling["max_tokens"]], "length"
            text = tok.decode(ids)
        else:
            ids.append(tok.eos_token_id)  # the model ended its turn; EOS is not in the text
        # the sampled token's entry, and a likelier token that was not sampled
        steps = [{t + 1: Logprob(-0.01, 1), t: Logprob(-0.1 * (j + 1), 2)} for j, t in enumerate(ids)]
        out = types.SimpleNamespace(
            index=0, text=text, token_ids=tuple(ids), logprobs=steps, finish_reason=finish
        )
        return types.SimpleNamespace(prompt_token_ids=prompt["prompt_token_ids"], outputs=[out])


class InProcessLLM(FakeLLM):
    """The engine's model lives in this process (vLLM V0, or V1 without multiprocessing)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.model = FakeModel()
        runner = types.SimpleNamespace(model=self.model)
        worker = types.SimpleNamespace(model_runner=runner)
        self.llm_engine = types.SimpleNamespace(model_executor=types.SimpleNamespace(driver_worker=worker))


class MultiprocessLLM(FakeLLM):
    """The model lives in worker processes: reachable only through apply_model (pickled)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.models = [FakeModel(), FakeModel()]  # two tensor-parallel workers

    def apply_model(self, func):
        func = pickle.loads(pickle.dumps(func))  # as it travels to the workers
        return [func(m) for m in self.models]


@pytest.fixture
def fake_vllm(monkeypatch, tokenizer):
    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams, vllm.EngineArgs = FakeLLM, SamplingParamsRecord, EngineArgs
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = TokensPrompt
    vllm.inputs = inputs
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    monkeypatch.setattr(FakeLLM, "tokenizer", tokenizer)
    monkeypatch.setattr(FakeLLM, "instances", [])
    monkeypatch.setattr(FakeLLM, "script", [])
    monkeypatch.setattr(module, "resolve_model", lambda name: f"/resolved/{name}")
    return vllm


def test_without_vllm_the_error_names_the_gpu_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` now fails, installed or not
    with pytest.raises(DependencyNotInstalled, match=r'pip install "searchgym\[gpu\]"'):
        VLLMPolicy("smollm2-135m-instruct")


def test_engine_arguments(fake_vllm):
    policy = VLLMPolicy(
        "smollm2-135m-instruct", tensor_parallel_size=2, max_model_len=4096, enforce_eager=True
    )
    assert FakeLLM.instances[-1].kwargs == {
        "model": "/resolved/smollm2-135m-instruct",  # through resolve_model, so aliases work
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.9,
        "dtype": "auto",
        "seed": 0,
        "max_model_len": 4096,
        "logprobs_mode": "processed_logprobs",
        "enforce_eager": True,
    }
    assert policy.tokenizer is FakeLLM.tokenizer and policy.name == "smollm2-135m-instruct"
    fake_vllm.EngineArgs = OldEngineArgs  # a vLLM without logprobs_mode is not given one
    VLLMPolicy("m", seed=3)
    assert "logprobs_mode" not in FakeLLM.instances[-1].kwargs and FakeLLM.instances[-1].kwargs["seed"] == 3


def test_generate_builds_token_prompts_and_seeded_sampling_params(fake_vllm):
    policy = VLLMPolicy("m", seed=10)
    params = SamplingParams(max_new_tokens=16, temperature=0.7, top_p=0.9, stop=("</search>", "</answer>"))
    FakeLLM.script = ["a", "b", "c", "d", "e"]
    policy.generate([[1, 2, 3], [4, 5]], params)
    policy.generate([[6]], params)
    policy.generate([[7, 8], [9]], SamplingParams(seed=5))
    first, second, third = FakeLLM.instances[-1].calls
    assert first["prompts"] == [{"prompt_token_ids": [1, 2, 3]}, {"prompt_token_ids": [4, 5]}]
    assert first["tqdm"] is False
    assert first["sampling"][0] == {
        "n": 1,
        "max_tokens": 16,
        "temperature": 0.7,
        "top_p": 0.9,
        "stop": ["</search>", "</answer>"],
        "include_stop_str_in_output": True,
        "logprobs": 0,
        "seed": 10,
    }
    # one seed per request, a new base seed per call, an explicit seed used as given
    assert [s["seed"] for s in first["sampling"]] == [10, request_seed(10, 1)]
    assert [s["seed"] for s in second["sampling"]] == [11]
    assert [s["seed"] for s in third["sampling"]] == [5, request_seed(5, 1)]


def test_outputs_become_completions(fake_vllm, tokenizer):
    policy = VLLMPolicy("m")
    FakeLLM.script = ["<search> capital </search> and more", "one two three four five six", "Oslo"]
    stop = SamplingParams(max_new_tokens=4, stop=("</search>",))
    searched, cut, ended = policy.generate([[1], [2], [3]], stop)
    assert searched.text == "<search> capital </search>" and searched.finish_reason == "stop"
    assert tokenizer.decode(searched.token_ids) == "<search> capital </search>"
    assert searched.logprobs == pytest.approx([-0.1 * (j + 1) for j in range(len(searched.token_ids))])
    assert cut.finish_reason == "length" and len(cut.token_ids) == len(cut.logprobs) == 4
    assert ended.text == "Oslo" and ended.finish_reason == "stop"
    assert ended.token_ids[-1] == tokenizer.eos_token_id and len(ended.logprobs) == len(ended.token_ids)


def test_bad_prompts_are_rejected(fake_vllm):
    policy = VLLMPolicy("m")
    with pytest.raises(TypeError, match="use chat"):
        policy.generate("hello", SamplingParams())
    with pytest.raises(ValueError, match="at least one token"):
        policy.generate([[]], SamplingParams())
    assert policy.generate([], SamplingParams()) == []


def test_chat_applies_the_chat_template(fake_vllm, tokenizer):
    policy = VLLMPolicy("m")
    FakeLLM.script = ["Hi"]
    conversation = [{"role": "user", "content": "hello"}]
    [done] = policy.chat([conversation], SamplingParams())
    sent = FakeLLM.instances[-1].calls[0]["prompts"][0]["prompt_token_ids"]
    expected = tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    assert tokenizer.decode(sent) == expected and done.text == "Hi"


def test_policy_agent_drives_it_with_token_ids(fake_vllm, tokenizer):
    env = lambda: searchgym.make("searchgym/FictionalQA-BM25-v0", n_passages=300)  # noqa: E731
    task = env().unwrapped.tasks[0]
    policy = VLLMPolicy("m")
    FakeLLM.script = [f"<search> {task.question} </search>", f"<answer> {task.answers[0]} </answer>"]
    [episode] = run_episodes(env, lambda: PolicyAgent(policy, SamplingParams(temperature=0.0)), [task])
    assert [t.tool for t in episode.turns] == ["search", "answer"] and episode.em == 1.0
    traj = episode.trajectory
    first, second = (c["prompts"][0]["prompt_token_ids"] for c in FakeLLM.instances[-1].calls)
    assert first == traj.prompt_ids and second == traj.prompt_ids + traj.ids[: len(second) - len(first)]
    generated = [lp for lp, m in zip(traj.logprobs, traj.mask) if m]
    assert len(generated) == sum(traj.mask) and all(lp < 0 for lp in generated)


def test_load_weights_into_an_in_process_engine(fake_vllm):
    fake_vllm.LLM = InProcessLLM
    policy = VLLMPolicy("m")
    weights = {"lm_head.weight": torch.ones(2, 2), "norm.weight": torch.zeros(2)}
    policy.load_weights(weights.items())
    assert [name for name, _ in policy.llm.model.loaded] == ["lm_head.weight", "norm.weight"]
    assert policy.llm.resets == 1  # cached prefixes were computed with the old weights


def test_load_weights_through_apply_model_in_every_worker(fake_vllm):
    fake_vllm.LLM = MultiprocessLLM
    policy = VLLMPolicy("m")
    policy.load_weights([("norm.weight", torch.full((3,), 2.0, requires_grad=True))])
    for model in policy.llm.models:
        [(name, tensor)] = model.loaded
        assert name == "norm.weight" and tensor.device.type == "cpu" and not tensor.requires_grad
        assert torch.equal(tensor, torch.full((3,), 2.0))
    assert policy.llm.resets == 1


def test_load_weights_without_a_route_says_so(fake_vllm):
    policy = VLLMPolicy("m")
    with pytest.raises(PolicyError, match="weights cannot be updated in place"):
        policy.load_weights([("w", torch.zeros(1))])
