"""What the gateway records of an episode: every model call's tokens exactly as sampled, and the
token streams a trainer learns from.

A `Call` holds the prompt's token ids as the model read them, the sampled ids and their sampling
log-probs. `token_streams` merges the calls of one episode: a call whose prompt starts with an
earlier stream's tokens (its prompt and completion, and what came after: a tool result, the next
user turn) continues that stream, the new prompt tokens masked out of the loss; any other call
starts a stream of its own. The gateway builds a continuing conversation's prompt from the
tokens it sampled (see `searchgym.agents.gateway.chat`), so a multi-turn program gives one stream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from searchgym.agents.policies.agent import Trajectory


@dataclass
class Call:
    """One model call: ``prompt_ids`` as the model read them, ``ids`` as it sampled them (an
    end-of-sequence token included), ``logprobs`` one per sampled id under the sampling
    distribution, and the ``temperature`` it sampled at."""

    prompt_ids: list[int]
    ids: list[int]
    logprobs: list[float]
    finish_reason: str
    temperature: float


class WaitClock:
    """The seconds in which at least one of an episode's requests waited for the model: its
    periods of ``with waiting():``, overlapping ones counted once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._since = 0.0
        self._total = 0.0

    @contextmanager
    def waiting(self) -> Iterator[None]:
        with self._lock:
            if self._open == 0:
                self._since = time.monotonic()
            self._open += 1
        try:
            yield
        finally:
            with self._lock:
                self._open -= 1
                if self._open == 0:
                    self._total += time.monotonic() - self._since

    def seconds(self) -> float:
        """The seconds waited so far, a wait still under way included."""
        with self._lock:
            return self._total + (time.monotonic() - self._since if self._open else 0.0)


@dataclass
class EpisodeLog:
    """The calls one episode's credentials made, in the order they were sampled, the errors its
    requests met (a malformed request is refused and noted here), and how long they waited for
    the model (``waits``)."""

    name: str
    calls: list[Call] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    waits: WaitClock = field(default_factory=WaitClock)


def token_streams(calls: Sequence[Call]) -> list[Trajectory]:
    """The calls as token streams: each call's sampled ids with mask 1 and their log-probs; a
    call whose prompt extends an earlier stream (the latest such) continues it, the extension
    masked 0.

    >>> first = Call([1, 2], [3, 4], [-0.1, -0.2], "stop", 1.0)
    >>> second = Call([1, 2, 3, 4, 5], [6], [-0.3], "stop", 1.0)
    >>> other = Call([9], [8], [-0.4], "stop", 1.0)
    >>> [(s.prompt_ids, s.ids, s.mask) for s in token_streams([first, second, other])]
    [([1, 2], [3, 4, 5, 6], [1, 1, 0, 1]), ([9], [8], [1])]
    """
    streams: list[Trajectory] = []
    for call in calls:
        stream = next((s for s in reversed(streams) if _extends(call.prompt_ids, s)), None)
        if stream is None:
            stream = Trajectory(list(call.prompt_ids))
            streams.append(stream)
        else:
            stream.extend(call.prompt_ids[len(stream.prompt_ids) + len(stream.ids) :], 0)
        stream.turn_starts.append(len(stream.ids))
        stream.extend(call.ids, 1, call.logprobs)
        stream.turn_ends.append(len(stream.ids))
    return streams


def _extends(prompt: Sequence[int], stream: Trajectory) -> bool:
    n, m = len(stream.prompt_ids), len(stream.ids)
    return len(prompt) >= n + m and prompt[:n] == stream.prompt_ids and prompt[n : n + m] == stream.ids
