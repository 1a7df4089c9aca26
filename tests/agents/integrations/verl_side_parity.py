"""The parity half of verl_side.py (imported by it): the scripted agents through searchgym's agent
loop, through SearchgymTool's BaseTool lifecycle, and through verl's own ``tool_agent`` loop, each
against ``searchgym eval``'s episodes on its 200 dev tasks."""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path
from statistics import fmean

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.tools.tool_registry import initialize_tools_from_config
from verl.workers.rollout.replica import TokenOutput
from verl_side import ENV_ID, dataset_rows, run_loop

from searchgym.agents import make_agent, run_episodes, summarize
from searchgym.agents.integrations.verl import AGENT_NAME, SearchgymTool, tool_reward, verl_rows
from searchgym.agents.play.episode import episode_figures
from searchgym.agents.play.rollout import sample_tasks
from searchgym.agents.play.session import EnvSession, agent_reset_info
from searchgym.envs.registry import make


class ScriptedServer:
    """verl's server manager emitting a scripted agent's actions as token ids: it reads the
    observation from the tokens appended since its last answer (``unwrap`` pulls it out of a chat
    template's tool message) and answers with the agent's next action."""

    def __init__(self, tokenizer, unwrap=None) -> None:
        self.tokenizer, self.unwrap = tokenizer, unwrap
        self.agent, self.first_observation, self.seen = None, "", None

    def start(self, agent, info, first_observation) -> None:
        agent.reset(agent_reset_info(info))
        self.agent, self.first_observation, self.seen = agent, first_observation, None

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        if self.seen is None:
            observation = self.first_observation
        else:
            observation = self.tokenizer.decode(prompt_ids[self.seen :])
            if self.unwrap:
                observation = self.unwrap(observation)
        # after the answer, verl's tool loop samples again: stop calling tools
        text = "Done." if observation is None else self.agent.act(observation)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        self.seen = len(prompt_ids) + len(ids)
        return TokenOutput(token_ids=ids, log_probs=None, stop_reason="completed")


def native(protocol: str, name: str, tasks) -> list:
    return run_episodes(
        lambda: make(ENV_ID, protocol=protocol), functools.partial(make_agent, name, seed=0), tasks, n_envs=4
    )


def check_parity(config, tokenizer, work: Path) -> dict:
    """The scripted agents through the agent loop, the tools directly, and verl's tool loop."""
    tasks = sample_tasks(make(ENV_ID).unwrapped.tasks, 200, seed=0)
    result = {}
    tool_files = {}
    for protocol in ("tags", "tool_calls"):
        rows = verl_rows(ENV_ID, tasks, seed=0, protocol=protocol)
        items = dataset_rows(config, tokenizer, rows, work / f"parity-{protocol}.parquet")
        _agent_loop_registry[AGENT_NAME] = {
            "_target_": "searchgym.agents.integrations.verl.SearchgymAgentLoop",
            "env_id": ENV_ID,
            "env_kwargs": {"protocol": protocol},
        }
        server = ScriptedServer(tokenizer)
        tool_files[protocol] = prepare_tools(work, protocol)
        tools = {t.name: t for t in initialize_tools_from_config(tool_files[protocol])}
        for name in ("oracle", "heuristic"):
            expected = native(protocol, name, tasks)
            figures = [episode_figures(ep) for ep in expected]
            agent = make_agent(name, seed=0)
            via_loop, via_tools, tool_episodes = [], [], []
            for row, item in zip(rows, items):
                info = EnvSession(ENV_ID, protocol=protocol).reset(seed=row["extra_info"]["seed"])[1]
                info = {**info, "task": json.loads(row["extra_info"]["task"])}
                server.start(agent, info, row["prompt"][0]["content"])
                out = run_loop(config, tokenizer, server, {"temperature": 1.0, "logprobs": False}, item)
                via_loop.append({**out.extra_fields["reward_extra_info"], "score": out.reward_score})
                episode, score = asyncio.run(play_tools(tools, agent, info, row))
                tool_episodes.append(episode)
                via_tools.append(score)
            key = f"{protocol}/{name}"
            summary = summarize(expected)
            result[key] = {
                "native": {k: summary[k] for k in ("em", "f1", "searches", "return")},
                "loop": {k: fmean(f[k] for f in via_loop) for k in ("em", "f1", "searches", "return")},
                "loop_episodes_equal": [{k: v for k, v in f.items() if k != "score"} for f in via_loop]
                == figures,
                "loop_scores_equal": [f["score"] for f in via_loop] == [ep.total_reward for ep in expected],
                "tool_episodes_equal": [
                    (episode_figures(ep), [t.observation for t in ep.turns]) for ep in tool_episodes
                ]
                == [(episode_figures(ep), [t.observation for t in ep.turns]) for ep in expected],
                "tool_scores_equal": via_tools == [ep.total_reward for ep in expected],
                "components": {
                    term: [
                        fmean(ep.reward_components[term] for ep in expected),
                        fmean(f[f"reward/{term}"] for f in via_loop),
                    ]
                    for term in expected[0].reward_components
                },
            }
    result["tool_agent_loop"] = check_tool_agent_loop(
        config, tokenizer, tasks, work, tool_files["tool_calls"]
    )
    return result


def prepare_tools(work: Path, protocol: str) -> str:
    """The tool config prepare_verl_data writes, for ``protocol`` (without the parquet files)."""
    probe = EnvSession(ENV_ID, protocol=protocol)
    tools = [
        {
            "class_name": "searchgym.agents.integrations.verl.SearchgymTool",
            "config": {
                "type": "native",
                "tool": t.name,
                "env_id": ENV_ID,
                "env_kwargs": {"protocol": protocol},
            },
        }
        for t in probe.tools
    ]
    path = work / f"tools-{protocol}.yaml"
    path.write_text(json.dumps({"tools": tools}))
    return str(path)


async def play_tools(tools, agent, info, row):
    """The BaseTool lifecycle by hand: create (one instance id for the trajectory's tools), execute
    each call the agent writes (parsed by the env's protocol), calc_reward, release."""
    agent.reset(agent_reset_info(info))
    session_protocol = agent_reset_info(info)["protocol"]
    instance = f"traj-{row['extra_info']['index']}"
    for name, tool in tools.items():
        await tool.create(instance, create_kwargs=row["extra_info"]["tools_kwargs"][name]["create_kwargs"])
    observation = row["prompt"][0]["content"]
    while True:
        call = session_protocol.parse(agent.act(observation))
        response, _, _ = await tools[call.name].execute(instance, call.arguments)
        session = SearchgymTool._sessions[instance]
        if session.done:
            break
        tag = session_protocol.result_tag  # the env's observation, which the tool gives unwrapped
        observation = f"\n\n<{tag}>{response.text}</{tag}>\n\n"
    score = await tools["search"].calc_reward(instance)
    episode = session.episode
    for tool in tools.values():
        await tool.release(instance)
    return episode, score


def check_tool_agent_loop(config, tokenizer, tasks, work: Path, tool_file: str) -> dict:
    """verl's own tool_agent loop (hermes parser) over SearchgymTool, tool_calls protocol."""
    tools = initialize_tools_from_config(tool_file)
    # verl cuts tool responses to 256 characters by default: the docs say to raise it, as here
    config = OmegaConf.merge(
        config, {"actor_rollout_ref": {"rollout": {"multi_turn": {"max_tool_response_length": 8192}}}}
    )

    def unwrap(text):  # the tool message of SmolLM2's (ChatML) template, wrapped as the env wraps it
        body = text.split("<|im_start|>tool\n", 1)[-1].rsplit("<|im_end|>", 1)[0]
        if body.startswith("Your answer is recorded"):
            return None
        return f"\n\n<tool_response>{body}</tool_response>\n\n"

    server = ScriptedServer(tokenizer, unwrap=unwrap)
    rows = verl_rows(ENV_ID, tasks, seed=0, protocol="tool_calls", agent_name="tool_agent")
    items = dataset_rows(config, tokenizer, rows, work / "tool-loop.parquet")
    result = {}
    for name in ("oracle", "heuristic"):
        expected = native("tool_calls", name, tasks)
        agent, scores = make_agent(name, seed=0), []
        for row, item in zip(rows, items):
            info = EnvSession(ENV_ID, protocol="tool_calls").reset()[1]
            info = {**info, "task": json.loads(row["extra_info"]["task"])}
            server.start(agent, info, row["prompt"][0]["content"])
            sampling = {"temperature": 1.0, "logprobs": False}
            out = run_loop(config, tokenizer, server, sampling, item, tools=tools, name="tool_agent")
            extra = {**item["extra_info"], **out.extra_fields}
            scores.append(tool_reward(item["data_source"], "", item["reward_model"]["ground_truth"], extra))
        result[name] = {
            "scores_equal": scores == [ep.total_reward for ep in expected],
            "return": [fmean(scores), summarize(expected)["return"]],
        }
    return result
