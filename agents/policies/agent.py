"""`PolicyAgent`: a language-model policy playing episodes, many in one batch, keeping the tokens.

An episode is one token stream: the templated first prompt (instructions and question), then
for every turn the tokens the policy generated (mask 1, with their sampling log-probs) followed by
the tokens that show the observation (mask 0). Earlier tokens are never re-tokenized or
re-templated, so what the trainer scores is exactly what the policy saw and sampled.

How an observation joins the stream (``inline``): the Search-R1 way appends it to the
assistant's own turn (``<information>…</information>`` right after ``</search>``); otherwise, or
when the model closed its turn with an end-of-sequence token, the turn is closed and the
observation arrives as a new user message, templated by the model's chat template.

Tool calling through the chat template: under the ``tool_calls`` protocol, when the template
renders tools (Qwen2.5's does, SmolLM2's does not), the prompt shows the env's tools as the
template shows them, the model ends each turn with its end-of-sequence token (no stop string),
and each result arrives as a ``tool`` message. These are the very tokens trl's ``GRPOTrainer``
builds for the same conversation, so a model trained here is trained for trl too.

Policies without a tokenizer (an OpenAI-compatible server) are driven through ``chat`` with the
same conversation as messages; they yield no token stream.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from searchgym.agents.policies.base import Completion, Message, Policy, RolloutEngine, SamplingParams
from searchgym.envs.tools import ToolCall
from searchgym.errors import ConfigError

_SENTINEL = "\x00searchgym-turn\x00"


@dataclass
class Trajectory:
    """The tokens of one episode: ``prompt_ids`` then ``ids``. ``mask[i]`` is 1 where ``ids[i]``
    is a policy token the loss trains on, 0 for observation and template tokens and for the
    policy's self-written search results (self-search). ``logprobs[i]`` is the sampling
    log-prob of every policy-generated token, 0.0 for the others. ``turn_starts[t]`` and
    ``turn_ends[t]`` delimit turn t's generated tokens in ``ids``; so ``prompt_ids +
    ids[:turn_starts[t + 1]]`` is what the policy saw after turn t and its observation."""

    prompt_ids: list[int]
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    turn_starts: list[int] = field(default_factory=list)
    sampled: bool = True
    """Whether the policy sampled these tokens; False for a scripted guide's episode that GRPO
    trains on (`GRPOConfig.guide`), whose ``logprobs`` are then not the policy's: the update
    takes the trained model's own in their place."""

    def extend(self, ids: Sequence[int], mask: int, logprobs: Sequence[float] | None = None) -> None:
        self.ids.extend(ids)
        self.mask.extend([mask] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


class ChatFormat:
    """The token pieces a chat template puts between turns, found by rendering a conversation
    with a sentinel assistant message and checking that a longer conversation only appends.
    ``tools`` (function schemas) are rendered as the template renders them, and `tool_turn`
    puts a tool's result in a ``tool`` message."""

    def __init__(
        self, tokenizer: Any, system_prompt: str | None = None, tools: Sequence[dict[str, Any]] | None = None
    ) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError("the policy's tokenizer has no chat template; PolicyAgent needs one")
        self.tokenizer = tokenizer
        self.head: list[Message] = [{"role": "system", "content": system_prompt}] if system_prompt else []
        self.tools = list(tools) if tools else None
        base = self._render([{"role": "user", "content": "q"}, {"role": "assistant", "content": _SENTINEL}])
        self.turn_end = base[base.index(_SENTINEL) + len(_SENTINEL) :]
        """The text the template puts after an assistant message (its end-of-sequence token first)."""
        self._base = base

    def _render(self, messages: list[Message], generation_prompt: bool = False) -> str:
        return self.tokenizer.apply_chat_template(
            self.head + messages, tools=self.tools, tokenize=False, add_generation_prompt=generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered template text (its special tokens are in the text)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt(self, text: str) -> list[int]:
        """The first user message and the assistant's generation prompt."""
        return self.encode(self._render([{"role": "user", "content": text}], generation_prompt=True))

    def close_turn(self, completion: Completion) -> list[int]:
        """What the template puts after an assistant message, less the end-of-sequence token the
        model already produced."""
        end, eos = self.turn_end, self.tokenizer.eos_token
        ended = completion.token_ids[-1:] == [self.tokenizer.eos_token_id]
        if ended and eos and end.startswith(eos):
            end = end[len(eos) :]
        return self.encode(end)

    def user_turn(self, text: str) -> list[int]:
        """A new user message after a closed assistant turn, and the next generation prompt."""
        turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _SENTINEL}]
        return self._suffix(turns, {"role": "user", "content": text})

    def tool_turn(self, name: str, text: str) -> list[int]:
        """The result ``text`` of tool ``name`` after a closed assistant turn that called it, and
        the next generation prompt: what trl's ``GRPOTrainer`` appends (its ``_get_tool_suffix_ids``
        renders the same call and ``tool`` message)."""
        call = {"type": "function", "function": {"name": name, "arguments": {}}}
        turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
        return self._suffix(turns, {"role": "tool", "name": name, "content": text})

    def _suffix(self, turns: list[Message], message: Message) -> list[int]:
        """The tokens ``message`` and the generation prompt add after ``turns``."""
        base = self._render(turns)
        full = self._render([*turns, message], generation_prompt=True)
        if not full.startswith(base):
            raise ConfigError(
                "the chat template changes earlier turns when a turn is added (it re-renders history), "
                "so tokens could not be accumulated turn by turn; use inline results or another template"
            )
        return self.encode(full[len(base) :])


def renders_tools(tokenizer: Any, tools: Sequence[dict[str, Any]]) -> bool:
    """Whether ``tokenizer``'s chat template shows ``tools`` to the model (templates that do tool
    calling put them in the prompt; SmolLM2's ignores them)."""
    conversation = [{"role": "user", "content": "q"}]
    plain = tokenizer.apply_chat_template(conversation, tokenize=False)
    return tokenizer.apply_chat_template(conversation, tools=list(tools), tokenize=False) != plain


class PolicyAgent:
    """An `Agent` backed by a `Policy`. Agents that share a policy act together: `act_all`
    makes one policy call for all of them (the rollout does this); `act` is the one-agent case.

    ``inline`` None means: inline results for the ``tags`` protocol, user messages otherwise
    (``tool`` messages under ``tool_calls`` when the chat template renders tools).
    After an episode, ``trajectory`` holds its tokens (None for policies without a tokenizer)
    and ``completions`` the raw completions of its turns.
    """

    def __init__(
        self,
        policy: Policy,
        params: SamplingParams | None = None,
        *,
        system_prompt: str | None = None,
        inline: bool | None = None,
    ) -> None:
        self.policy = policy
        self.params = params or SamplingParams()
        self.system_prompt = system_prompt
        self.inline = inline
        tokenizer = getattr(policy, "tokenizer", None)
        self.format = ChatFormat(tokenizer, system_prompt) if tokenizer is not None else None
        self._plain_format = self.format
        self._tool_formats: dict[str, ChatFormat | None] = {}  # by the tools' JSON
        self.trajectory: Trajectory | None = None
        self.completions: list[Completion] = []
        self._messages: list[Message] = []
        self._stop: tuple[str, ...] = ()
        self._inline = False
        self._protocol: Any = None
        self._self_search = False
        self._writing_information = False

    @property
    def batch_key(self) -> tuple[int, SamplingParams]:
        """Agents with equal keys can share one policy call."""
        return id(self.policy), self._params()

    def reset(self, info: dict[str, Any]) -> None:
        if self.trajectory is not None and isinstance(self.policy, RolloutEngine):  # the last episode ended
            self.policy.forget(self.trajectory.prompt_ids + self.trajectory.ids)
        protocol = self._protocol = info["protocol"]
        self._stop = tuple(protocol.stop)
        self._inline = protocol.name == "tags" if self.inline is None else self.inline
        self.format = self._plain_format
        if protocol.name == "tool_calls" and not self._inline and self.format is not None:
            self.format = self._tool_format(protocol) or self.format
            if self.format.tools:
                self._stop = ()  # the turn ends with end-of-sequence, as in chat tool calling
        self._self_search = getattr(protocol, "self_search", False)
        self._writing_information = False
        self._messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        self.trajectory = None
        self.completions = []

    def _tool_format(self, protocol: Any) -> ChatFormat | None:
        """The format that shows ``protocol``'s tools, if the chat template renders tools."""
        schemas = [t.schema() for t in protocol.tools]
        key = json.dumps(schemas, sort_keys=True)
        if key not in self._tool_formats:
            tokenizer, system_prompt = self.format.tokenizer, self.system_prompt  # type: ignore[union-attr]
            shown = renders_tools(tokenizer, schemas)
            self._tool_formats[key] = ChatFormat(tokenizer, system_prompt, schemas) if shown else None
        return self._tool_formats[key]

    def _params(self) -> SamplingParams:
        stop = tuple(dict.fromkeys((*self.params.stop, *self._stop)))
        return SamplingParams(**{**self.params.__dict__, "stop": stop})

    def act(self, observation: str) -> str:
        return PolicyAgent.act_all([self], [observation])[0]

    @staticmethod
    def act_all(agents: Sequence[PolicyAgent], observations: Sequence[str]) -> list[str]:
        """One policy call for ``agents`` (all with the same `batch_key`)."""
        if not agents:
            return []
        policy, params = agents[0].policy, agents[0]._params()
        for agent, observation in zip(agents, observations):
            agent._observe(observation)
        if all(a.format is not None for a in agents):
            prompts = [a.trajectory.prompt_ids + a.trajectory.ids for a in agents]  # type: ignore[union-attr]
            completions = policy.generate(prompts, params)
        else:
            completions = policy.chat([a._messages for a in agents], params)
        for agent, completion in zip(agents, completions):
            agent._record(completion)
        return [c.text for c in completions]

    def _observe(self, observation: str) -> None:
        """Add an observation (the first one is the instructions and question). In self-search,
        an observation that opens an ``<information>`` block makes the next completion the
        policy's own search results, kept out of the loss (mask 0)."""
        self._writing_information = self._self_search and observation.endswith("<information>")
        if not self.completions:  # the episode's first prompt
            self._messages.append({"role": "user", "content": observation})
            if self.format is not None:
                self.trajectory = Trajectory(self.format.prompt(observation))
            return
        last = self.completions[-1]
        inline = (
            self._inline
            and self.format is not None  # a chat API cannot continue an assistant message
            and last.finish_reason == "stop"
            and any(s in last.text for s in self._stop)
        )
        if inline:
            self._messages[-1]["content"] += observation
        else:
            self._messages.append({"role": "user", "content": observation})
        if self.format is not None and self.trajectory is not None:
            if inline:
                self.trajectory.extend(self.format.encode(observation), 0)
            elif self.format.tools:
                action = self._protocol.parse(last.text)
                name = action.name if isinstance(action, ToolCall) else "error"
                result = self._protocol.unwrap_result(observation)
                self.trajectory.extend(self.format.close_turn(last) + self.format.tool_turn(name, result), 0)
            else:
                self.trajectory.extend(self.format.close_turn(last) + self.format.user_turn(observation), 0)

    def _record(self, completion: Completion) -> None:
        self.completions.append(completion)
        last = self._messages[-1]
        if last["role"] == "assistant":
            last["content"] += completion.text
        else:
            self._messages.append({"role": "assistant", "content": completion.text})
        if self.trajectory is not None:
            logprobs = completion.logprobs or [0.0] * len(completion.token_ids)
            self.trajectory.turn_starts.append(len(self.trajectory.ids))
            self.trajectory.extend(completion.token_ids, 0 if self._writing_information else 1, logprobs)
            self.trajectory.turn_ends.append(len(self.trajectory.ids))
