"""searchgym.registry: one registration contract for agents, policies, retrievers and rewards."""

import pytest

import searchgym
from searchgym.agents import make_agent
from searchgym.errors import ConfigError
from searchgym.registry import Registry, load_entry_point


class CountingAgent:
    def __init__(self, seed=0, step=1):
        self.seed, self.step = seed, step

    def reset(self, info):
        pass

    def act(self, observation):
        return "<answer> 0 </answer>"


def test_names_and_module_attr_both_resolve_and_unknown_names_suggest():
    registry = Registry("widget", "list_widgets()")
    registry.register("counter", "test_registries:CountingAgent", kwargs={"step": 2})
    assert registry.make("counter").step == 2
    assert registry.resolve("test_registries:CountingAgent") is CountingAgent
    with pytest.raises(
        ConfigError, match=r"unknown widget 'countr'. Did you mean 'counter'\? Known: counter \("
    ):
        registry.resolve("countr")
    with pytest.raises(ConfigError, match="already registered; pass override=True"):
        registry.register("counter", CountingAgent)
    registry.register("counter", CountingAgent, override=True)
    with pytest.raises(ConfigError, match="must be a callable or a 'module:attr' string"):
        registry.register("other", "not-an-entry-point")
    with pytest.raises(ConfigError, match="has no attribute 'CountingAgnt'.*Did you mean 'CountingAgent'"):
        load_entry_point("test_registries:CountingAgnt")


def test_a_registered_agent_gets_the_seed_and_is_checked():
    searchgym.register_agent("test-counting", CountingAgent, step=3)
    agent = make_agent("test-counting", seed=7)
    assert (agent.seed, agent.step) == (7, 3) and "test-counting" in searchgym.list_agents()
    assert make_agent("test_registries:CountingAgent").step == 1
    searchgym.register_agent("test-not-an-agent", lambda: object())
    with pytest.raises(ConfigError, match="has no reset and no act method"):
        make_agent("test-not-an-agent")
    with pytest.raises(ConfigError, match="unknown agent 'orcle'. Did you mean 'oracle'"):
        make_agent("orcle")


def test_every_builtin_entry_resolves():
    registries = ("AGENTS", "RETRIEVERS", "PROTOCOLS", "TASK_SETS", "REWARDS")
    for registry in (getattr(searchgym.registry, name) for name in registries):
        for name in registry.names():
            assert callable(registry.resolve(name)), name
    assert {"hf", "cpu", "cpu-bf16", "vllm", "openai"} <= set(searchgym.list_policies())
    assert searchgym.registry.POLICIES.spec("hf").entry_point == "searchgym.agents.policies.hf:HFPolicy"
