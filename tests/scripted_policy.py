"""A policy for tests that writes a script instead of sampling."""

from searchgym.agents.policies.base import Completion, RolloutEngine


class ScriptedPolicy(RolloutEngine):
    """Answers every prompt with the next text of ``script``, as a model would: its token ids, plus
    the end-of-sequence token unless a stop string ends the text. Each token gets ``logprob``
    (None: no log-probs, as a scripted agent has none). Records the prompts and the calls."""

    name = "scripted"

    def __init__(self, tokenizer, script, logprob: float | None = None):
        self.tokenizer, self.script, self.logprob = tokenizer, list(script), logprob
        self.prompts, self.calls = [], 0

    def generate(self, prompts, params):
        self.calls += 1
        out = []
        for prompt in prompts:
            self.prompts.append(list(prompt))
            text = self.script.pop(0)
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            if not any(text.endswith(s) for s in params.stop):
                ids.append(self.tokenizer.eos_token_id)
            logprobs = [] if self.logprob is None else [self.logprob] * len(ids)
            out.append(Completion(text, ids, logprobs, "stop"))
        return out

    def reseed(self, seed):
        """A script has no randomness to seed."""

    def chat(self, conversations, params):
        raise AssertionError("a policy with a tokenizer is driven by token ids")
