"""The verl adapter, driven by verl 0.9's own code in .venv-verl (verl_side.py prints what it saw):
the agent loop keeps the sampled tokens and log-probs and masks exactly the observation tokens; the
scripted agents reach the native ``searchgym eval`` figures through the loop, the tools and verl's
``tool_agent`` loop; the recipe config is valid for verl; the docs page's blocks run.

verl's inference servers need a GPU: the server manager is a stand-in that samples from the tiny
random Llama (HFPolicy) or replays a scripted agent. Nothing else of verl is replaced."""

import functools
import importlib.util
import re
from pathlib import Path
from statistics import fmean

import pytest
from side_venvs import run_in
from user_env import IMPORTED_ENV, IMPORTED_MODULE, PLUGIN_ENV, write_module

from searchgym.agents import make_agent, run_episodes, summarize
from searchgym.agents.play.rollout import sample_tasks
from searchgym.envs.registry import make
from searchgym.errors import DependencyNotInstalled

ENV_ID = "searchgym/FictionalQA-BM25-v0"
SIDE = Path(__file__).with_name("verl_side.py")


@pytest.fixture(scope="module")
def report(tiny_llama_dir, tmp_path_factory):
    return run_in("verl", SIDE, str(tiny_llama_dir), str(tmp_path_factory.mktemp("verl")), timeout=900)


def test_the_agent_loop_keeps_sampled_tokens_and_masks_observations(report):
    tokens = report["tokens"]
    assert tokens["turns"] >= 2 and tokens["n_observation_tokens"] > 0  # observations were appended
    assert tokens["ids_equal"] and tokens["mask_equal"]  # sampled ids (1) then observation ids (0), in turn
    assert tokens["sampled_equal"] and tokens["logprobs_equal"]  # the server's own log-probs
    assert tokens["observation_logprobs_zero"] and tokens["stream_decodes_to_text"]  # actions + observations
    assert tokens["reward"] == tokens["expected_reward"] and tokens["prompt_is_chat"]


def test_verls_worker_pads_scores_and_logs_the_episode(report):
    tokens = report["tokens"]
    assert tokens["worker_shapes"] == [[2, 160], [2, 160]]  # responses and rollout log-probs, padded
    assert all(0 < s <= 160 for s in tokens["worker_mask_sums"])
    assert tokens["worker_rm_at_last"] == [0.0, 0.0] and tokens["worker_rm_total"] == 0.0  # random text
    assert tokens["worker_extra_keys"] == [
        "cover_em",
        "em",
        "errors",
        "f1",
        "invalid",
        "obs_tokens",
        "return",
        "reward/format",
        "reward/obs_tokens_1k",
        "reward/outcome",
        "reward/search_calls",
        "searches",
        "tool_errors",
        "truncated",
        "turns",
    ]
    assert report["registered"] == "searchgym.agents.integrations.verl.SearchgymAgentLoop"


@pytest.mark.parametrize("protocol", ["tags", "tool_calls"])
@pytest.mark.parametrize("agent", ["oracle", "heuristic"])
def test_scripted_agents_give_the_native_eval_figures(report, protocol, agent):
    """Native figures computed here, in the main venv, against the loop's and the tools' in verl's."""
    tasks = sample_tasks(make(ENV_ID).unwrapped.tasks, 200, seed=0)
    episodes = run_episodes(
        lambda: make(ENV_ID, protocol=protocol), functools.partial(make_agent, agent, seed=0), tasks, n_envs=4
    )
    native = summarize(episodes)
    seen = report["parity"][f"{protocol}/{agent}"]
    assert seen["loop"] == pytest.approx(
        {k: native[k] for k in ("em", "f1", "searches", "return")}, abs=1e-12
    )
    assert seen["loop_episodes_equal"] and seen["loop_scores_equal"]  # episode by episode
    assert seen["tool_episodes_equal"] and seen["tool_scores_equal"]  # BaseTool create/execute/release
    for term, (expected, through_verl) in seen["components"].items():
        assert expected == pytest.approx(fmean(ep.reward_components[term] for ep in episodes))
        assert through_verl == pytest.approx(expected)


def test_verls_tool_agent_loop_gives_the_native_returns(report):
    for agent in ("oracle", "heuristic"):
        seen = report["parity"]["tool_agent_loop"][agent]
        assert seen["scores_equal"], agent
    assert report["parity"]["tool_agent_loop"]["heuristic"]["return"] == pytest.approx([0.115, 0.115])


def test_the_recipe_is_valid_for_verl(report):
    recipe = report["recipe"]
    assert recipe["unknown_keys"] == []  # every key it sets is one of verl's ppo_trainer
    assert recipe["agent_loop"] == "searchgym_agent" and recipe["adv_estimator"] == "grpo"
    assert recipe["model"] == "Qwen/Qwen2.5-3B-Instruct"


def test_the_docs_page_runs(report):
    docs = report["docs"]
    assert docs["paths"] == ["agent_loops", "dev", "tools", "train"]
    assert docs["files"] == ["agent_loops.yaml", "dev.parquet", "tools.yaml", "train.parquet"]
    assert "actor_rollout_ref.rollout.n=5" in docs["overrides"] and docs["n"] == 5


def test_configuration_errors_say_how_to_fix_them(report):
    errors = report["errors"]
    assert re.search(r"has no tool 'open'; its tools are \['answer', 'search'\]", errors["tool_name"])
    assert re.search(r"takes tool, env_id, env_kwargs and imports, got \['top_k'\]", errors["tool_key"])
    assert re.search(r"needs extra_info.task \(JSON\) or extra_info.task_id; .*verl_rows\(\)", errors["row"])


def test_without_verl_the_adapter_names_the_extra():
    if importlib.util.find_spec("verl") is not None:
        pytest.skip("verl is installed here; the main venv has none")
    with pytest.raises(DependencyNotInstalled, match=r'pip install "searchgym\[verl\]"'):
        import searchgym.agents.integrations.verl  # noqa: F401


def test_the_modules_docstring_examples_run_where_verl_is(report):
    attempted, failed = report["doctests"]
    assert attempted >= 1 and failed == 0


def test_searchgym_does_not_import_verl(report):
    assert report["searchgym_imports_verl"] == "False"


def test_verls_configs_name_a_users_own_envs(user_site, tiny_llama_dir, tmp_path):
    """prepare_verl_data writes the configs of a plug-in package's env (named by id alone) and of a
    plain module's env (``imports``, written into both configs); in fresh worker processes verl makes
    the agent loop or the tools from them, each first (the one that imports the module), and the
    oracle plays an episode of each env through both."""
    write_module(tmp_path)
    prepared = run_in("verl", SIDE, "user-prepare", str(user_site), str(tmp_path))
    plugin_loop, module_loop = (loops[0] for loops in prepared["loops"])
    assert plugin_loop["env_id"] == PLUGIN_ENV and "imports" not in plugin_loop
    assert module_loop["env_id"] == IMPORTED_ENV and module_loop["imports"] == [IMPORTED_MODULE]
    assert all(t["config"]["imports"] == [IMPORTED_MODULE] for t in prepared["tools"][1]["tools"])
    assert prepared["unknown"].startswith("no environment 'mylab/Nope-v0' is registered. Did you mean")
    assert prepared["unknown"].endswith(
        "(prepare_verl_data's imports: [MODULE]) or by installing its package with an entry point in the "
        "'searchgym.plugins' group (docs/plug-in.md)"
    )
    assert prepared["missing"] == (
        "prepare_verl_data's imports mylab_nope: no module 'mylab_nope' in the current directory or on "
        "PYTHONPATH"
    )
    for first in ("loop", "tools"):
        played = run_in("verl", SIDE, "user-play", str(user_site), str(tmp_path), str(tiny_llama_dir), first)
        assert list(played)[:2] == [f"plugin/{first}", f"plugin/{'tools' if first == 'loop' else 'loop'}"]
        for name, env_id in (("plugin", PLUGIN_ENV), ("module", IMPORTED_ENV)):
            for way in ("loop", "tools"):
                assert played[f"{name}/{way}"] == {"env_id": env_id, "em": 1.0, "searches": 1.0}
