"""`Batcher` puts the requests of many programs into one generation call: it waits while they keep
coming (up to its window after the last), goes at once when every open episode is waiting, keeps
different sampling apart, and where a call fails, fails only the requests the policy fails on alone."""

import time

import pytest

from searchgym.agents.gateway.batcher import Batcher
from searchgym.generation import Completion, SamplingParams


class Recorder:
    """A policy that answers every prompt with its length, and records each call's prompts."""

    name = "recorder"

    def __init__(self, fail=False):
        self.calls, self.fail = [], fail

    def generate(self, prompts, params):
        if self.fail or any(-1 in p for p in prompts):
            raise RuntimeError("the engine ran out of memory")
        self.calls.append([list(p) for p in prompts])
        return [Completion(str(len(p)), [len(p)], [0.0]) for p in prompts]


def submit_spaced(batcher, n, gap_s):
    futures = []
    for i in range(n):
        futures.append(batcher.submit([1] * (i + 1), SamplingParams()))
        time.sleep(gap_s)
    return [f.result(timeout=10) for f in futures]


def test_requests_that_keep_coming_within_the_window_share_one_call():
    policy = Recorder()
    batcher = Batcher(policy, window_s=0.05)
    completions = submit_spaced(batcher, 4, 0.02)  # 60 ms from first to last: more than one window
    batcher.close()
    assert [c.token_ids for c in completions] == [[1], [2], [3], [4]]
    assert batcher.batches == [4]


def test_a_request_after_the_window_starts_the_next_call():
    batcher = Batcher(Recorder(), window_s=0.02)
    submit_spaced(batcher, 2, 0.2)
    batcher.close()
    assert batcher.batches == [1, 1]


def test_it_goes_at_once_when_every_episode_waits():
    batcher = Batcher(Recorder(), window_s=10.0, ready=lambda n: n >= 2)
    start = time.monotonic()
    submit_spaced(batcher, 2, 0.0)
    batcher.close()
    assert batcher.batches == [2] and time.monotonic() - start < 5


def test_different_sampling_is_generated_apart():
    policy = Recorder()
    batcher = Batcher(policy, window_s=0.05)
    futures = [batcher.submit([1], SamplingParams(max_new_tokens=n)) for n in (4, 8, 4)]
    [f.result(timeout=10) for f in futures]
    batcher.close()
    assert sorted(batcher.batches) == [1, 2]


def test_a_failed_call_fails_each_of_its_requests():
    batcher = Batcher(Recorder(fail=True), window_s=0.02)
    futures = [batcher.submit([1], SamplingParams()) for _ in range(2)]
    for future in futures:
        with pytest.raises(RuntimeError, match="out of memory"):
            future.result(timeout=10)
    batcher.close()


def test_a_request_the_policy_fails_on_fails_alone_and_the_others_of_its_call_are_answered():
    policy = Recorder()
    batcher = Batcher(policy, window_s=10.0, ready=lambda n: n >= 3)
    good, bad, other = (batcher.submit(p, SamplingParams()) for p in ([1, 2], [3, -1], [4]))
    assert good.result(timeout=10).token_ids == [2] and other.result(timeout=10).token_ids == [1]
    with pytest.raises(RuntimeError, match="out of memory"):
        bad.result(timeout=10)
    batcher.close()
    assert policy.calls == [[[1, 2]], [[4]]]  # the shared call failed; each was tried alone
