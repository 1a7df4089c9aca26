"""Run by test_verl_adapter.py with .venv-verl's python (verl pins transformers < 5.11): drives
searchgym's verl adapter with verl's own code on a CPU and prints one JSON line of what it saw.

    python tests/agents/integrations/verl_side.py TINY_LLAMA_DIR WORK_DIR

verl's inference servers (vLLM, SGLang) need a GPU, so the server manager is the one stand-in: a
class with the server manager's ``generate`` that either samples from the tiny random Llama with
searchgym's HFPolicy (token ids and sampling log-probs, as vLLM returns them) or emits a scripted
agent's actions as token ids. Everything else is verl's: its hydra config, RLHFDataset, the
agent-loop registry and ``hydra.utils.instantiate``, ``AgentLoopWorker.generate_sequences``, the tool
config loader and its ``tool_agent`` loop with the hermes parser.
"""

from __future__ import annotations

import asyncio
import doctest
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import hydra
from datasets import Dataset
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopWorker,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.protocol import DataProto
from verl.trainer.main_ppo import need_critic, need_reference_policy
from verl.utils.config import validate_config
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.replica import TokenOutput

from searchgym.agents.integrations import verl as verl_module
from searchgym.agents.integrations.verl import (
    AGENT_NAME,
    SearchgymTool,
    prepare_verl_data,
    verl_rows,
)
from searchgym.agents.play.episode import episode_figures
from searchgym.agents.play.session import EnvSession
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.policies.hf import HFPolicy
from searchgym.envs.registry import make
from searchgym.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
ENV_ID = "searchgym/FictionalQA-BM25-v0"


def compose(name: str, overrides: list[str], config_dir: Path) -> OmegaConf:
    with hydra.initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra.compose(name, overrides=overrides)


def leaves(node, prefix=""):
    """Dotted keys of every leaf of a plain dict."""
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def has_key(config, dotted: str) -> bool:
    parent, _, last = dotted.rpartition(".")
    node = OmegaConf.select(config, parent) if parent else config
    # .keys(): `in` on a DictConfig says False for a mandatory (???) key
    return node is not None and last in node.keys()  # noqa: SIM118


def check_recipe() -> dict:
    """The recipe composes with verl's config, validates as verl's main_ppo validates it, and
    every key it sets is one of verl's."""
    config = compose("verl_search_r1", [], ROOT / "configs")
    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    ours = OmegaConf.to_container(OmegaConf.load(ROOT / "configs/verl_search_r1.yaml"))
    ours = {k: v for k, v in ours.items() if k not in ("hydra", "defaults")}
    verl_dir = Path(sys.modules["verl"].__file__).parent / "trainer/config"
    base = compose("ppo_trainer", [], verl_dir)
    unknown = [key for key in leaves(ours) if not has_key(base, key)]
    return {
        "unknown_keys": unknown,
        "agent_loop": config.actor_rollout_ref.rollout.agent.default_agent_loop,
        "adv_estimator": config.algorithm.adv_estimator,
        "model": config.actor_rollout_ref.model.path,
    }


def trainer_config(tiny: Path, data: dict, response_length: int):
    """The recipe with the tiny model and the files prepare_verl_data wrote, as verl composes it."""
    return compose(
        "verl_search_r1",
        [
            f"actor_rollout_ref.model.path={tiny}",
            f"data.train_files={data['train']}",
            f"data.val_files={data['dev']}",
            f"data.max_response_length={response_length}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={data['agent_loops']}",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={data['tools']}",
            "data.dataloader_num_workers=0",
        ],
        ROOT / "configs",
    )


def dataset_rows(config, tokenizer, rows: list[dict], path: Path) -> list[dict]:
    """``rows`` written to parquet and read back by verl's RLHFDataset, as the trainer reads them."""
    Dataset.from_list(rows).to_parquet(path)
    dataset = RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=config.data, processor=None)
    return [dataset[i] for i in range(len(dataset))]


def loop_kwargs(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in ("dummy_tensor", "agent_name")}


def run_loop(config, tokenizer, server, sampling: dict, item: dict, tools=(), name=AGENT_NAME):
    """One trajectory as AgentLoopWorker runs it: a new loop made inside the event loop, run once."""

    async def go():
        loop = instantiate(config, tokenizer, server, tools=tools, name=name)
        assert isinstance(loop, ToolAgentLoop) == (name == "tool_agent")
        return await loop.run(dict(sampling), **loop_kwargs(item))

    return asyncio.run(go())


def instantiate(config, tokenizer, server, tools=(), name=AGENT_NAME):
    """An agent loop made the way AgentLoopWorker makes one."""
    return hydra.utils.instantiate(
        config=_agent_loop_registry[name],
        trainer_config=DictConfigWrap(config=config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type="llama",
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap(list(tools)),
    )


class ModelServer:
    """verl's server manager, ``generate`` only, backed by a real model on the CPU: at most
    ``chunk`` tokens a call, so that random text makes several turns."""

    def __init__(self, policy: HFPolicy, chunk: int) -> None:
        self.policy, self.chunk, self.calls = policy, chunk, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        params = SamplingParams(
            max_new_tokens=min(self.chunk, sampling_params["max_tokens"]),
            temperature=sampling_params["temperature"],
            stop=tuple(sampling_params["stop"]),
        )
        (completion,) = self.policy.generate([prompt_ids], params)
        self.calls.append(
            {"prompt": list(prompt_ids), "ids": completion.token_ids, "lp": completion.logprobs}
        )
        return TokenOutput(
            token_ids=completion.token_ids, log_probs=completion.logprobs, stop_reason="completed"
        )


def check_tokens(config, tokenizer, tiny: Path, work: Path) -> dict:
    """The loop with a real model: mask, log-probs, observation tokens, decoded text."""
    tasks = [t for t in make(ENV_ID).unwrapped.tasks if t.metadata["hops"] == 2][:2]
    items = dataset_rows(config, tokenizer, verl_rows(ENV_ID, tasks, protocol="tags"), work / "model.parquet")
    server = ModelServer(HFPolicy(str(tiny)), chunk=12)
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
    output = run_loop(config, tokenizer, server, sampling, items[0])
    ids, mask, lps = output.response_ids, output.response_mask, output.response_logprobs
    sampled = [i for i, m in zip(ids, mask) if m == 1]
    sampled_lp = [lp for lp, m in zip(lps, mask) if m == 1]
    # replay the sampled actions in a fresh env: the observations the loop must have appended
    session = EnvSession(ENV_ID, protocol="tags")
    session.reset(task=tasks[0], seed=0)
    expected_ids, expected_mask, text = [], [], ""
    for call in server.calls:
        action = tokenizer.decode(call["ids"], skip_special_tokens=True)
        step = session.step(action)
        expected_ids += call["ids"]
        expected_mask += [1] * len(call["ids"])
        text += action
        if not step.done:
            obs = tokenizer.encode(step.observation, add_special_tokens=False)
            expected_ids += obs
            expected_mask += [0] * len(obs)
            text += step.observation
    n = config.actor_rollout_ref.rollout.response_length
    # verl's worker on a batch of two: padding, rm_scores at the last token, logged figures
    worker = AgentLoopWorker(config, llm_client=ModelServer(HFPolicy(str(tiny)), chunk=12))
    batch = DataProto.from_single_dict(collate_fn(items))
    batch.meta_info["validate"] = False
    out = asyncio.run(worker.generate_sequences(batch))
    rm = out.batch["rm_scores"]
    last = out.batch["attention_mask"][:, -n:].sum(-1) - 1
    return {
        "turns": len(server.calls),
        "ids_equal": ids == expected_ids[:n],
        "mask_equal": mask == expected_mask[:n],
        "sampled_equal": sampled == [i for c in server.calls for i in c["ids"]][: len(sampled)],
        "logprobs_equal": sampled_lp == [lp for c in server.calls for lp in c["lp"]][: len(sampled)],
        "observation_logprobs_zero": all(lp == 0.0 for lp, m in zip(lps, mask) if m == 0),
        "n_observation_tokens": mask.count(0),
        "truncated": len(expected_ids) > n,
        "stream_decodes_to_text": tokenizer.decode(expected_ids, skip_special_tokens=True) == text,
        "reward": output.reward_score,
        "expected_reward": session.episode.total_reward,
        "prompt_is_chat": tokenizer.decode(output.prompt_ids).count(tasks[0].question) == 1,
        "worker_shapes": [list(out.batch["responses"].shape), list(out.batch["rollout_log_probs"].shape)],
        "worker_mask_sums": out.batch["response_mask"].sum(-1).tolist(),
        "worker_rm_at_last": [float(rm[i, last[i]]) for i in range(len(items))],
        "worker_rm_total": float(rm.sum()),
        "worker_extra_keys": sorted(k for k in out.meta_info["reward_extra_keys"]),
        "worker_em": out.non_tensor_batch["em"].tolist(),
    }


def check_docs(work: Path) -> dict:
    """docs/trainers/verl.md: its Python block runs, its command's overrides compose and validate."""
    from doc_blocks import doc_block  # tests/ is on PYTHONPATH

    namespace = {}
    cwd = os.getcwd()
    os.chdir(work)
    try:
        exec(doc_block("trainers/verl.md", "python", 0), namespace)
    finally:
        os.chdir(cwd)
    command = shlex.split(doc_block("trainers/verl.md", "bash", 0).replace("\\\n", " "))
    overrides = [arg for arg in command if "=" in arg and not arg.startswith("--")]
    config = compose("verl_search_r1", overrides, ROOT / "configs")
    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    return {
        "paths": sorted(namespace["paths"]),
        "files": sorted(p.name for p in (work / "data/searchgym-verl").iterdir()),
        "overrides": overrides,
        "n": config.actor_rollout_ref.rollout.n,
    }


def errors() -> dict:
    """The messages of the adapter's configuration errors."""
    found = {}
    for name, make_error in {
        "tool_name": lambda: SearchgymTool({"tool": "open"}),
        "tool_key": lambda: SearchgymTool({"tool": "search", "top_k": 3}),
        "row": lambda: verl_module._row_task(EnvSession(ENV_ID), {"index": 3}),
    }.items():
        try:
            make_error()
        except ConfigError as e:
            found[name] = str(e)
    return found


def main(tiny: str, work: str) -> None:
    work_dir = Path(work)
    data = prepare_verl_data(work_dir / "data", ENV_ID, protocol="tags")
    config = trainer_config(Path(tiny), {k: str(v) for k, v in data.items()}, response_length=160)
    # the agent-loop config prepare_verl_data wrote, loaded as AgentLoopWorker loads it
    for entry in OmegaConf.load(data["agent_loops"]):
        _agent_loop_registry[entry.name] = entry
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    report = {
        "recipe": check_recipe(),
        "registered": _agent_loop_registry[AGENT_NAME]["_target_"],
        "tokens": check_tokens(config, tokenizer, Path(tiny), work_dir),
    }
    parity_config = OmegaConf.merge(config, {"data": {"max_response_length": 8192}})
    from verl_side_parity import check_parity  # the second half of this script (it imports this one)

    report["parity"] = check_parity(parity_config, tokenizer, work_dir)
    report["docs"] = check_docs(work_dir)
    report["errors"] = errors()
    doctests = doctest.testmod(verl_module, optionflags=doctest.ELLIPSIS)
    report["doctests"] = [doctests.attempted, doctests.failed]
    fresh = "import sys, searchgym, searchgym.agents, searchgym.envs; print('verl' in sys.modules)"
    report["searchgym_imports_verl"] = subprocess.run(
        [sys.executable, "-c", fresh], capture_output=True, text=True, check=True
    ).stdout.strip()
    print(json.dumps(report))


def user_prepare(site: str, work: str) -> None:
    """A user's process, in ``work`` with ``site`` (where the plug-in package ``searchgym-mylab``
    is installed) on its path: `prepare_verl_data` for the plug-in's env, named by id alone, and
    for the env of ``work``'s ``mylab_turing.py``, named with ``imports``; then the errors of an id
    nothing registers and of a module that is not there. Prints what the configs hold."""
    from user_env import IMPORTED_ENV, IMPORTED_MODULE, PLUGIN_ENV

    sys.path.insert(0, site)
    os.chdir(work)
    plugin = prepare_verl_data("plugin", PLUGIN_ENV, protocol="tags")
    module = prepare_verl_data("module", IMPORTED_ENV, imports=[IMPORTED_MODULE], protocol="tags")
    report = {
        "loops": [json.loads(paths["agent_loops"].read_text()) for paths in (plugin, module)],
        "tools": [json.loads(paths["tools"].read_text()) for paths in (plugin, module)],
    }
    for name, call in {
        "unknown": lambda: prepare_verl_data("x", "mylab/Nope-v0"),
        "missing": lambda: prepare_verl_data("x", IMPORTED_ENV, imports=["mylab_nope"]),
    }.items():
        try:
            call()
        except ConfigError as e:
            report[name] = str(e)
    print(json.dumps(report))


def user_play(site: str, work: str, tiny: str, first: str) -> None:
    """A fresh worker's process (``site`` and ``work`` on its path, as PYTHONPATH puts them on Ray
    workers' paths, but not in ``work``; nothing of the user's imported): verl makes the agent loop
    (``first == "loop"``) or the tools (``"tools"``) from the configs `user_prepare` wrote, for the
    plug-in's env and then the module's, before anything else has imported the module; each plays
    the oracle on the env's first dev task, then the other way does too. Prints the episodes'
    figures."""
    from transformers import AutoTokenizer
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl_side_parity import ScriptedServer, play_tools

    from searchgym.agents import make_agent

    sys.path[:0] = [site, work]
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    report = {}

    async def play(way: str, config, data: dict, item: dict) -> dict:
        """One episode of the oracle through the loop or the tools, made from the configs."""
        if way == "loop":
            made = instantiate(config, tokenizer, ScriptedServer(tokenizer))
        else:
            made = {tool.name: tool for tool in initialize_tools_from_config(data["tools"])}
        row = Dataset.from_parquet(data["dev"])[0]
        env_id = row["data_source"]  # registered now, by whichever was made
        info = {**EnvSession(env_id).reset()[1], "task": json.loads(row["extra_info"]["task"])}
        if way == "tools":
            episode, _ = await play_tools(made, make_agent("oracle"), info, row)
            return {"env_id": env_id, **{k: episode_figures(episode)[k] for k in ("em", "searches")}}
        made.server_manager.start(make_agent("oracle"), info, row["prompt"][0]["content"])
        out = await made.run({"temperature": 1.0, "logprobs": False}, **loop_kwargs(item))
        return {"env_id": env_id, **{k: out.extra_fields["reward_extra_info"][k] for k in ("em", "searches")}}

    for name in ("plugin", "module"):
        files = {"dev": "dev.parquet", "agent_loops": "agent_loops.yaml", "tools": "tools.yaml"}
        data = {key: str(Path(work, name, file)) for key, file in files.items()}
        config = trainer_config(Path(tiny), {**data, "train": data["dev"]}, response_length=512)
        for entry in OmegaConf.load(data["agent_loops"]):
            _agent_loop_registry[entry.name] = entry
        dataset = RLHFDataset(
            data_files=[data["dev"]], tokenizer=tokenizer, config=config.data, processor=None
        )
        for way in ("loop", "tools") if first == "loop" else ("tools", "loop"):
            report[f"{name}/{way}"] = asyncio.run(play(way, config, data, dataset[0]))
    print(json.dumps(report))


if __name__ == "__main__":
    modes = {"user-prepare": user_prepare, "user-play": user_play}
    modes[sys.argv[1]](*sys.argv[2:]) if sys.argv[1] in modes else main(*sys.argv[1:])
