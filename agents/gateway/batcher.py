"""One generation call for the requests of many programs at once.

Requests arrive one by one, each from its own program. `Batcher` hands them to the policy from
one thread: it takes the first waiting request, gathers more until every open episode is waiting
for the model (``ready``) or none has come for ``window_s`` (at most `MAX_WINDOWS` windows after
the first: 32 programs' requests reach it over up to 32 ms on 2 cores, each parsed and templated
under the GIL), and generates the gathered prompts in one ``policy.generate`` call per distinct
`SamplingParams` (at most ``policy.max_batch_size`` or ``max_batch`` prompts per call).

One request never fails another: where a call fails, each of its requests is generated again on
its own, so only the requests the model fails on alone get the error. (The gateway refuses bad
input before it gets here; this is for what it cannot foresee.)
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from searchgym.generation import Completion, SamplingParams

log = logging.getLogger(__name__)
_STOP = object()
POLL_S = 0.002
MAX_WINDOWS = 5


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: Future


class Batcher:
    """Generates with ``policy`` from a thread of its own (see the module docstring); ``ready(n)``
    says whether ``n`` waiting requests are all that can come."""

    def __init__(
        self,
        policy,
        *,
        window_s: float = 0.02,
        max_batch: int | None = None,
        ready: Callable[[int], bool] = lambda n: False,
    ) -> None:
        self.policy = policy
        self.window_s = window_s
        self.max_batch = max_batch or getattr(policy, "max_batch_size", None) or 64
        self.ready = ready
        self.lock = threading.Lock()
        """Held while the policy generates: take it to use the policy from another thread."""
        self.batches: list[int] = []
        """The size of every batch generated, for benchmarks and tests."""
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="searchgym-gateway-batcher", daemon=True)
        self._thread.start()

    def submit(self, prompt_ids: Sequence[int], params: SamplingParams) -> Future:
        """A future of the completion of ``prompt_ids``."""
        future: Future = Future()
        self._queue.put(_Request(list(prompt_ids), params, future))
        return future

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout=60)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            batch = [first]
            stop = self._gather(batch)
            by_params: dict[SamplingParams, list[_Request]] = defaultdict(list)
            for request in batch:
                if request.future.set_running_or_notify_cancel():  # else its caller is gone
                    by_params[request.params].append(request)
            for params, requests in by_params.items():
                self._generate(requests, params)
            if stop:
                return

    def _gather(self, batch: list) -> bool:
        """Add waiting requests to ``batch`` (see the module docstring); True if told to stop.
        Polls every `POLL_S`: an episode that ends makes the rest ready without a new request."""
        first = time.monotonic()
        deadline = first + self.window_s
        while len(batch) < self.max_batch and not self.ready(len(batch)):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                request = self._queue.get(timeout=min(left, POLL_S))
            except queue.Empty:
                continue
            if request is _STOP:
                return True
            batch.append(request)
            deadline = min(time.monotonic() + self.window_s, first + MAX_WINDOWS * self.window_s)
        return False

    def _generate(self, requests: list[_Request], params: SamplingParams) -> None:
        try:
            with self.lock:
                completions: list[Completion] = self.policy.generate([r.prompt_ids for r in requests], params)
            if len(completions) != len(requests):
                raise RuntimeError(
                    f"the policy gave {len(completions)} completions for {len(requests)} prompts"
                )
        except Exception as error:
            if len(requests) == 1:  # its program hears it (the gateway answers 500)
                requests[0].future.set_exception(error)
                return
            log.warning("a batch of %d failed (%r); generating its requests one by one", len(requests), error)
            for request in requests:
                self._generate([request], params)
            return
        self.batches.append(len(requests))
        for request, completion in zip(requests, completions):
            request.future.set_result(completion)
