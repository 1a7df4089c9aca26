"""The trl adapter: `TrlEnv`'s tools step a real FictionalQA-BM25-v0 env and `get_reward` is the
env's summed reward; `trl_dataset` rows start the right task; and trl's GRPOTrainer trains through it."""

import functools
import inspect
import json
import math

import pytest
from transformers.utils import get_json_schema
from user_env import PLUGIN_ENV

import searchgym
from searchgym.agents.integrations.trl import TrlEnv, trl_dataset
from searchgym.agents.play.session import ANSWERED, EPISODE_OVER, TURN_LIMIT
from searchgym.envs.tools import ANSWER, SEARCH
from searchgym.errors import ConfigError

ENV_ID = "searchgym/FictionalQA-BM25-v0"


@pytest.fixture(scope="module")
def one_hop():
    env = searchgym.make(ENV_ID)
    return [t for t in env.unwrapped.tasks if t.metadata["hops"] == 1][:4]


@pytest.fixture(scope="module")
def rows(one_hop):
    return trl_dataset(ENV_ID, tasks=one_hop)


def test_rows_hold_the_envs_own_prompt_and_the_task(rows, one_hop):
    assert rows.column_names == ["prompt", "task_id", "task"] and len(rows) == len(one_hop)
    env = searchgym.make(ENV_ID, protocol="tool_calls")
    for row, task in zip(rows, one_hop):
        first_observation, _ = env.reset(options={"task": task})
        assert row["prompt"] == [{"role": "user", "content": first_observation}]
        assert task.question in first_observation and "<tool_call>" in first_observation
        assert row["task_id"] == task.id and json.loads(row["task"]) == task.to_dict()


def test_reset_starts_the_rows_task_and_search_returns_the_envs_result(rows, one_hop):
    env = TrlEnv(ENV_ID)
    env.reset(**rows[1])  # trl passes every column, the prompt too
    assert env.task == one_hop[1] and not env.done
    result = env.search(one_hop[1].question)
    assert result.startswith("Doc 1(Title: ") and "tool_response" not in result  # the template wraps it
    assert env.info["n_searches"] == 1 and env.info["doc_ids"][0] == one_hop[1].evidence[0]
    assert env.calls == {"search": 1} and env.get_reward() == 0.0


def test_reward_is_the_envs_summed_reward_with_its_weights(rows, one_hop):
    rewards = {"per_search": 0.1, "per_1k_obs_tokens": 0.5, "format": 0.2}
    env = TrlEnv(ENV_ID, rewards=rewards)
    env.reset(**rows[0])
    env.search("first query")
    env.search(one_hop[0].question)
    assert env.answer(one_hop[0].answers[0]) == ANSWERED and env.done

    plain = searchgym.make(ENV_ID, protocol="tool_calls", rewards=rewards)  # the same actions, by hand
    plain.reset(options={"task": one_hop[0]})
    calls = [
        ("search", {"query": "first query"}),
        ("search", {"query": one_hop[0].question}),
        ("answer", {"answer": one_hop[0].answers[0]}),
    ]
    total = 0.0
    for name, arguments in calls:
        total += plain.step(f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>")[1]
    obs_tokens = env.info["obs_tokens"]
    assert env.get_reward() == pytest.approx(total)
    assert env.get_reward() == pytest.approx(1.0 + 0.2 - 2 * 0.1 - 0.5 * obs_tokens / 1000)
    assert env.info["em"] == 1.0 and env.calls == {"search": 2, "answer": 1}


def test_a_wrong_answer_earns_nothing_and_the_episode_stays_over(rows):
    env = TrlEnv(ENV_ID)
    env.reset(**rows[2])
    env.answer("certainly not this")
    assert env.get_reward() == 0.0 and env.info["em"] == 0.0
    assert env.search("more") == EPISODE_OVER and env.answer("again") == EPISODE_OVER
    assert env.calls == {"answer": 1} and env.get_reward() == 0.0


def test_an_invalid_argument_is_the_envs_error_observation(rows):
    env = TrlEnv(ENV_ID, rewards={"format": 1.0})
    env.reset(**rows[0])
    observation = env.search("  ")
    assert observation.startswith("Error: search needs a non-empty 'query'")
    assert env.info["n_invalid"] == 1 and not env.done
    env.answer(json.loads(rows[0]["task"])["answers"][0])
    assert env.get_reward() == 1.0  # right answer, but the format score is lost


def test_the_turn_limit_ends_the_episode(rows):
    env = TrlEnv(ENV_ID, max_turns=2)
    env.reset(**rows[0])
    assert not env.search("one").endswith(TURN_LIMIT)
    assert env.search("two").endswith(TURN_LIMIT) and env.done and env.info["n_searches"] == 2
    assert env.search("three") == EPISODE_OVER and env.calls == {"search": 2}


def test_reset_by_task_id_and_its_errors(one_hop):
    env = TrlEnv(ENV_ID)
    env.reset(task_id=one_hop[3].id, prompt=[])
    assert env.task == one_hop[3]
    with pytest.raises(ConfigError, match="task 'nope' is not one of the env's 800 tasks"):
        env.reset(task_id="nope")
    with pytest.raises(
        ConfigError, match=r"needs a 'task' \(JSON\) or 'task_id' column; got columns \['prompt'\]"
    ):
        env.reset(prompt=[])


def test_trl_sees_exactly_the_envs_tools_with_their_schemas():
    # what GRPOTrainer does: every public function of the class but reset and get_reward is a tool
    tools = [
        name
        for name, _ in inspect.getmembers(TrlEnv, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]
    assert tools == ["answer", "search"]
    env = TrlEnv(ENV_ID)
    for method, tool in ((env.search, SEARCH), (env.answer, ANSWER)):
        assert get_json_schema(method) == tool.schema()  # what trl renders is what searchgym renders


def test_envs_trl_cannot_drive_are_refused():
    with pytest.raises(ConfigError, match="uses the 'tags' protocol, but trl parses tool calls"):
        TrlEnv(ENV_ID, protocol="tags")
    with pytest.raises(ConfigError, match="self-search envs cannot run as tools"):
        TrlEnv("searchgym/FictionalQA-SelfSearch-v0")
    with pytest.raises(ConfigError, match="no environment 'searchgym/FictionalQA-BM26-v0'"):
        TrlEnv.factory("searchgym/FictionalQA-BM26-v0")
    with pytest.raises(ConfigError, match="unknown env option"):
        TrlEnv.factory(ENV_ID, top_kk=3)


def test_a_plugins_env_gets_the_tool_calls_protocol_in_a_fresh_process(user_envs):
    """trl names an env of an installed package (an entry point in ``searchgym.plugins``) by id
    only: it is made with the tool_calls protocol as searchgym's own are, and plays an episode.
    (Whether the env takes a protocol was read before the plug-ins loaded: it was made with tags.)"""
    rows = trl_dataset(PLUGIN_ENV)
    env = TrlEnv.factory(PLUGIN_ENV)()
    env.reset(**rows[1])
    assert "1936" in env.search("Alan Turing machine") and env.answer("1936") == ANSWERED
    assert env.get_reward() == 1.0 and env.calls == {"search": 1, "answer": 1}


def test_the_factory_makes_fresh_independent_envs(rows):
    factory = TrlEnv.factory(ENV_ID, top_k=1)
    first, second = factory(), factory()
    first.reset(**rows[0])
    second.reset(**rows[1])
    assert first.search("Treimyne Company founded").count("Doc ") == 1  # top_k reached the env
    assert first.calls == {"search": 1} and second.calls == {}


def test_the_warm_start_trains_on_the_tokens_trl_builds(rows, one_hop):
    """The oracle's episode as the warm start records it under Qwen2.5's template (searchgym train
    with ``chat_template: qwen2_5``) is, token for token, what trl's GRPOTrainer builds for the same
    calls: its prompt (the tools in the system prompt), the model's turns, each ending with the
    end-of-sequence token, and the tool results its ``_get_tool_suffix_ids`` appends."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer
    from trl import GRPOTrainer
    from trl.chat_template_utils import add_response_schema, parse_response

    from searchgym.agents.policies.models import resolve_chat_template, resolve_tokenizer
    from searchgym.agents.train.warm_start import oracle_trajectories

    tokenizer = AutoTokenizer.from_pretrained(resolve_tokenizer("smollm2-135m-instruct"))
    tokenizer.chat_template = resolve_chat_template("qwen2_5")
    add_response_schema(tokenizer)
    tool_env = functools.partial(searchgym.make, ENV_ID, protocol="tool_calls")
    [traj] = oracle_trajectories([tool_env], one_hop[:1], tokenizer)

    env = TrlEnv(ENV_ID)  # what trl does with rows[0], as in GRPOTrainer._generate and _tool_call_loop
    env.reset(**rows[0])
    tools = [env.search, env.answer]
    prompt = tokenizer.apply_chat_template(
        rows[0]["prompt"], tools=tools, add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    assert traj.prompt_ids == prompt
    template = {"chat_template": None, "chat_template_kwargs": {}}  # trl's own: the tokenizer's
    trainer = SimpleNamespace(processing_class=tokenizer, _tokenizer=tokenizer, _is_vlm=False, **template)
    ids, calls = [], []
    for start, end in zip(traj.turn_starts, traj.turn_ends):
        turn = traj.ids[start:end]
        assert turn[-1] == tokenizer.eos_token_id and all(traj.mask[start:end])
        ids += turn
        [call] = parse_response(tokenizer, turn, prefix=prompt + ids[: -len(turn)], tools=tools)["tool_calls"]
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        calls.append(name)
        result = getattr(env, name)(**arguments)
        if not env.done:
            message = {"role": "tool", "name": name, "content": result}
            ids += GRPOTrainer._get_tool_suffix_ids(trainer, [message])
    assert traj.ids == ids and calls == ["search", "answer"] and env.info["em"] == 1.0


def test_trl_model_finds_the_checkpoint_and_refuses_what_trl_cannot_use(tmp_path, tiny_llama_dir):
    from searchgym.agents.integrations.trl import trl_model

    with pytest.raises(ConfigError, match="is not a directory: give a run directory of searchgym train"):
        trl_model(tmp_path / "runs" / "nothing")
    with pytest.raises(ConfigError, match="holds neither a checkpoint of searchgym train nor a saved model"):
        trl_model(tmp_path)
    with pytest.raises(ConfigError, match=r"has no tool calling that trl parses; .*chat_template=qwen2_5"):
        trl_model(tiny_llama_dir)  # SmolLM2's own template


def half_scripted_trainer(answers_by_question):
    """trl's GRPOTrainer whose generation is half scripted. A random tiny model never writes a tool
    call, so the first rollout of each group of two follows a script (search the question, answer
    it right, stop) while the second is the model's own sample: the group's rewards differ and the
    update is not zero. Everything else (templating, tool-call parsing, the tool loop, masking,
    loss, optimiser step) is trl's own."""
    from trl import GRPOTrainer

    class HalfScripted(GRPOTrainer):
        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, **kwargs):
            tok = self.processing_class
            texts = [tok.decode(ids) for ids in prompt_ids]
            first_turn = all("</tool_response>" not in t for t in texts)
            scripted = [i for i in range(len(texts)) if not first_turn or i % 2 == 0]
            own = [i for i in range(len(texts)) if i not in scripted]
            completions = [[] for _ in texts]
            if own:
                sampled, _ = super()._generate_single_turn(
                    [prompt_ids[i] for i in own], None, {}, num_generations, **kwargs
                )
                for i, ids in zip(own, sampled):
                    completions[i] = ids
            for i in scripted:
                question = next(q for q in answers_by_question if q in texts[i])
                script = [
                    {"name": "search", "arguments": {"query": question}},
                    {"name": "answer", "arguments": {"answer": answers_by_question[question]}},
                ]
                turn = texts[i].count("</tool_response>")  # tool results so far
                text = f"<tool_call>\n{json.dumps(script[turn])}\n</tool_call>" if turn < 2 else "Done."
                completions[i] = tok(text + tok.eos_token, add_special_tokens=False)["input_ids"]
            return completions, None

    return HalfScripted


@pytest.fixture
def one_torch_thread():
    """A model this small runs fastest on one thread, most of all on a busy machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_two_trl_grpo_steps_through_the_adapter(tiny_llama_dir, tmp_path, one_hop, rows, one_torch_thread):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig
    from trl.chat_template_utils import qwen2_5_chat_template

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    tokenizer.chat_template = qwen2_5_chat_template  # SmolLM2's own template has no tool calling
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    episodes = []

    def record(environments, **_):
        """Not a reward: keeps what each finished rollout's env saw (scored 0)."""
        episodes.extend((dict(e.calls), e.get_reward(), e.task.id) for e in environments)
        return [0.0] * len(environments)

    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,  # one task per step, two rollouts of it
        num_generations=2,
        max_completion_length=256,  # a scripted episode takes about 230
        activation_checkpointing=False,  # generation then keeps its KV cache
        max_tool_calling_iterations=4,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    trainer_class = half_scripted_trainer({t.question: t.answers[0] for t in one_hop})
    with pytest.warns(UserWarning, match="environment_factory"):
        trainer = trainer_class(
            model=model,
            args=args,
            reward_funcs=[record],
            train_dataset=rows,
            processing_class=tokenizer,
            environment_factory=TrlEnv.factory(ENV_ID, top_k=1),  # short tool results
        )
    trainer.train()

    assert trainer.state.global_step == 2
    changed = [n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert changed, "no parameter changed"
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and all(math.isfinite(h["loss"]) for h in logs)
    # the env's reward reached trl: one right answer (1.0) and one silent sample (0.0) per group
    assert [h["rewards/TrlEnv/mean"] for h in logs] == [0.5, 0.5]
    assert all(h["tools/call_frequency"] == 1.0 for h in logs)  # 2 calls in every other rollout
    assert len(episodes) == 4 and {task for *_, task in episodes} == {t.id for t in one_hop[:2]}
    scripted = [e for e in episodes if e[1] == 1.0]
    assert len(scripted) == 2 and all(calls == {"search": 1, "answer": 1} for calls, *_ in scripted)
    assert all(calls == {} for calls, reward, _ in episodes if reward == 0.0)
