"""Warm start: oracle episodes recorded as the token streams PolicyAgent builds, and the masked
SFT loop that teaches the tiny random Llama the action protocol."""

import pytest
import torch
from scripted_policy import ScriptedPolicy
from transformers import AutoModelForCausalLM, AutoTokenizer

import searchgym
from searchgym.agents import OracleAgent, run_episodes
from searchgym.agents.policies.agent import PolicyAgent, Trajectory
from searchgym.agents.train.warm_start import oracle_trajectories, sft
from searchgym.errors import ConfigError, TrainingDiverged

WORLD = {"n_passages": 300, "seed": 0, "hops": [1, 2]}


def make_env(protocol="tags", **options):
    return searchgym.make("searchgym/FictionalQA-BM25-v0", protocol=protocol, **WORLD, **options)


@pytest.fixture(scope="module")
def tokenizer(tiny_llama_dir):
    return AutoTokenizer.from_pretrained(tiny_llama_dir)


@pytest.fixture(scope="module")
def tasks():
    return list(make_env().unwrapped.tasks)


@pytest.mark.parametrize("protocol", ["tags", "tool_calls"])
def test_the_recorded_stream_is_what_a_policy_agent_builds(tokenizer, tasks, protocol):
    chosen = [tasks[0], tasks[1], tasks[-1]]  # 1-hop and 2-hop questions
    recorded = oracle_trajectories([lambda: make_env(protocol)], chosen, tokenizer)
    oracle = run_episodes(lambda: make_env(protocol), OracleAgent, chosen)
    for traj, episode, task in zip(recorded, oracle, chosen):
        assert episode.em == 1.0
        texts = [turn.action for turn in episode.turns]
        script = ScriptedPolicy(tokenizer, texts)
        [played] = run_episodes(lambda: make_env(protocol), lambda s=script: PolicyAgent(s), [task])
        assert traj == played.trajectory  # ids, mask, logprobs and turn boundaries
        for t, prompt in enumerate(script.prompts):  # the prefix property: no re-tokenizing
            assert traj.prompt_ids + traj.ids[: traj.turn_starts[t]] == prompt
        policy_tokens = [i for i, m in zip(traj.ids, traj.mask) if m]
        assert tokenizer.decode(policy_tokens) == "".join(texts)  # mask 1 on the actions only
        assert len(traj.turn_starts) == len(texts) == len({*traj.turn_starts})


def test_a_given_env_is_used_and_left_open(tokenizer, tasks):
    env = make_env()
    [traj] = oracle_trajectories([env], tasks[:1], tokenizer, system_prompt="Be brief.")
    assert "Be brief." in tokenizer.decode(traj.prompt_ids)
    env.reset(options={"task": tasks[0]})  # still usable
    with pytest.raises(ConfigError, match="scripted agent"):
        oracle_trajectories([env], tasks[:1], tokenizer, agent="hf:smollm2-135m-instruct")
    with pytest.raises(ConfigError, match="Did you mean 'oracle'"):
        oracle_trajectories([env], tasks[:1], tokenizer, agent="oracel")


@pytest.fixture
def model(tiny_llama_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)


@pytest.fixture(scope="module")
def trajectories(tokenizer, tasks):
    return oracle_trajectories([lambda: make_env(top_k=1, max_obs_tokens=64)], tasks[:8], tokenizer)


def test_sft_lowers_the_loss_and_trains_in_place(model, trajectories):
    before = [p.detach().clone() for p in model.parameters()]
    model.eval()
    losses = sft(model, trajectories[:4], lr=1e-2, epochs=4, batch_size=2, seed=0)
    assert len(losses) == 8 and all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.7 * losses[0]
    assert not model.training  # the mode it came in with
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_grad_accumulation_averages_over_all_tokens_of_a_step(tiny_llama_dir, trajectories):
    runs = []
    for batch_size, grad_accum in ((3, 1), (1, 3), (2, 2)):  # 2 + 1: micro-batches of unequal size
        model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)
        losses = sft(model, trajectories[:3], lr=1e-3, epochs=2, batch_size=batch_size, grad_accum=grad_accum)
        runs.append((losses, [p.detach() for p in model.parameters()]))
    for losses, params in runs[1:]:
        assert losses == pytest.approx(runs[0][0], rel=1e-4)
        for a, b in zip(params, runs[0][1]):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_bad_settings_are_refused(model, trajectories):
    shortest = min(len(t.prompt_ids) for t in trajectories)
    with pytest.raises(ConfigError, match="no trajectory has a policy token within max_len"):
        sft(model, trajectories, lr=1e-3, max_len=shortest)
    with pytest.raises(ConfigError, match="batch_size must be a positive integer"):
        sft(model, trajectories, lr=1e-3, batch_size=0)
    with pytest.raises(ConfigError, match="schedule must be 'linear' or 'constant'"):
        sft(model, trajectories, lr=1e-3, schedule="cosine")


def test_a_diverging_loss_stops_before_stepping(model):
    traj = Trajectory([1, 2, 3], [4, 5], [1, 1], [0.0, 0.0], [2], [0])
    before = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        model.get_output_embeddings().weight[5] = float("nan")
    with pytest.raises(TrainingDiverged, match="the SFT loss is nan at step 0"):
        sft(model, [traj], lr=1e-3)
    changed = [i for i, (a, b) in enumerate(zip(before, model.parameters())) if not torch.equal(a, b)]
    assert len(changed) == 1  # only the weight poisoned by hand; the optimizer never stepped


@pytest.mark.slow
def test_sft_on_oracle_episodes_teaches_the_action_protocol(tiny_llama_dir):
    """A 2-layer, 32-wide random model cannot learn to copy unseen names in a few hundred steps,
    so it is trained and then played greedily on the same 8 questions: valid calls come back
    only if the recorded streams are the ones PolicyAgent builds at inference, token for token."""
    from searchgym.agents import summarize
    from searchgym.agents.policies.base import SamplingParams
    from searchgym.agents.policies.hf import HFPolicy

    def env():
        options = {"hops": 1, "max_turns": 3, "top_k": 1, "max_obs_tokens": 64}
        return searchgym.make("searchgym/FictionalQA-BM25-v0", n_passages=300, seed=0, **options)

    tasks = list(env().unwrapped.tasks)[:8]
    policy = HFPolicy(str(tiny_llama_dir), device="cpu")
    greedy = SamplingParams(max_new_tokens=48, temperature=0.0)

    def play():
        return summarize(run_episodes(env, lambda: PolicyAgent(policy, greedy), tasks, n_envs=8))

    before = play()
    trajectories = oracle_trajectories([env], tasks, policy.tokenizer)
    # 50 epochs left 3 of 8 streams garbled with transformers 5.23 (invalid rate 0.47, failing at
    # the previous commit too); 100 train the tiny model to convergence on them
    losses = sft(policy.model, trajectories, lr=1e-2, epochs=100, batch_size=2)
    after = play()
    assert len(losses) == 400 and sum(losses[-20:]) < 0.01 * sum(losses[:20])
    assert before["invalid_rate"] == 1.0 and before["searches"] == 0 and before["em"] == 0
    assert after["invalid_rate"] <= 0.35 and after["searches"] >= 0.75 and after["em"] >= 0.25, after
