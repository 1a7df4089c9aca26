"""Task sets by name: one registry (`searchgym.registry.TASK_SETS`) behind `searchgym.tasks.load`."""

import pytest

import searchgym
from searchgym import tasks
from searchgym.errors import ConfigError
from searchgym.registry import TASK_SETS
from searchgym.tasks import Task, TaskSet
from searchgym.tasks.datasets import BENCHMARKS
from searchgym.tasks.world.config import WorldConfig


def test_the_world_each_hop_count_and_every_benchmark_are_task_sets():
    hops = [f"fictional-{k}hop" for k in range(1, WorldConfig().max_hops + 1)]
    assert {"fictional", *hops, "miniwiki", "fanoutqa", *BENCHMARKS} <= set(searchgym.list_task_sets())
    loader = "searchgym.tasks.datasets:load_benchmark"
    benchmarks = [name for name in TASK_SETS.names() if TASK_SETS.spec(name).entry_point == loader]
    assert benchmarks == list(BENCHMARKS)  # the names searchgym/registry.py writes out


def test_the_fictional_names_load_their_hop_counts():
    two = tasks.load("fictional-2hop", split="train", n_passages=300)
    every = tasks.load("fictional", split="train", n_passages=300)
    assert {t.metadata["hops"] for t in every} == {1, 2, 3, 4}
    assert [t.id for t in two] == [t.id for t in every if t.metadata["hops"] == 2] != []


def test_an_unknown_task_set_names_the_closest():
    with pytest.raises(
        ConfigError, match=r"unknown task set 'fictional-5hop'. Did you mean 'fictional-4hop'"
    ):
        tasks.load("fictional-5hop")
    with pytest.raises(
        ConfigError, match=r"'hotpot'. Did you mean 'hotpotqa'\?.*\(searchgym.list_task_sets\(\)\)"
    ):
        tasks.load("hotpot")


def test_a_registered_task_set_loads_by_name_with_its_options():
    def capitals(split: str, country: str) -> TaskSet:
        return TaskSet(f"capitals/{split}", [Task(f"capitals/{split}/0", f"Capital of {country}?", ("?",))])

    searchgym.register_task_set("test-capitals", capitals, country="France")
    try:
        loaded = tasks.load("test-capitals", split="train")
        assert loaded.name == "capitals/train" and loaded[0].question == "Capital of France?"
        assert tasks.load("test-capitals", country="Spain")[0].question == "Capital of Spain?"
    finally:
        del TASK_SETS._specs["test-capitals"]
