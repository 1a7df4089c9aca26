"""The GRPO update reads the prompt a group's episodes share once, and gets the gradient that
reading every episode whole gives."""

import copy

import pytest
import torch

from searchgym.agents.train import shared_prompt, update
from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.freeze import freeze_all_but, top_modules
from searchgym.agents.train.loss import Sample


def group_episodes() -> list[list[Sample]]:
    """Two groups of three episodes, each group with its own prompt, and a lone episode; the
    episodes' lengths and masks differ, so micro-batches are padded."""
    generator = torch.Generator().manual_seed(0)
    groups = []
    for prompt_length, episodes in ((9, 3), (6, 3), (7, 1)):
        prompt = torch.randint(0, 1000, (prompt_length,), generator=generator).tolist()
        samples = []
        groups.append(samples)
        for e in range(episodes):
            rest = torch.randint(0, 1000, (5 + 3 * e,), generator=generator).tolist()
            mask = [1 if i % 4 != 3 else 0 for i in range(len(rest))]
            logprobs = [-2.0 * m for m in mask]
            advantages = [float(torch.randn((), generator=generator)) * m for m in mask]
            samples.append(Sample(prompt + rest, prompt_length, mask, logprobs, advantages))
    return groups


@pytest.mark.parametrize("micro_batch_size, trainable_layers", [(1, 0), (2, 1)])
def test_a_shared_prompt_read_once_gives_the_gradient_of_whole_reads(
    tiny_llama_dir, monkeypatch, micro_batch_size, trainable_layers
):
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    samples = group_episodes()
    reads = []
    monkeypatch.setattr(
        update, "SharedPrompt", lambda *a: reads.append(len(a[1])) or shared_prompt.SharedPrompt(*a)
    )
    steps, metrics = {}, {}
    for share in (False, True):
        model = copy.deepcopy(base)
        if trainable_layers:
            freeze_all_but(model, top_modules(model, trainable_layers))
        params = [p for p in model.parameters() if p.requires_grad]
        before = [p.detach().clone() for p in params]
        optimizer = torch.optim.SGD(params, lr=1.0)  # the step is minus the (clipped) gradient
        cfg = GRPOConfig(micro_batch_size=micro_batch_size, share_prompts=share, max_grad_norm=1e9)
        metrics[share] = update.update(model, None, optimizer, samples, cfg, Accelerator(cpu=True), 0)
        steps[share] = torch.cat([(b - p.detach()).flatten() for b, p in zip(before, params)])
    assert reads == [8, 5]  # each group's prompt (all but its last token) once; the lone one whole
    assert steps[True].abs().max() > 0
    torch.testing.assert_close(steps[True], steps[False], atol=1e-6, rtol=1e-4)
    for key in ("loss/policy", "loss/entropy", "loss/ratio", "loss/grad_norm"):
        assert metrics[True][key] == pytest.approx(metrics[False][key], rel=1e-4), key


def test_each_group_shares_its_prompt():
    parts = shared_prompt.by_group(group_episodes())
    assert [len(prompt) for prompt, _ in parts] == [8, 5, 0]  # the lone episode stays whole, last
    assert [len(run) for _, run in parts] == [3, 3, 1]
    assert all(s.start == 1 for _, run in parts[:2] for s in run)  # each from its prompt's last token


def test_a_kl_reference_keeps_whole_reads(tiny_llama_dir, monkeypatch):
    """The reference's log-probs come from whole episodes, so the update reads them whole too."""
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    reads = []
    monkeypatch.setattr(update, "SharedPrompt", lambda *a: reads.append(a) or shared_prompt.SharedPrompt(*a))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    cfg = GRPOConfig(micro_batch_size=2, kl_coef=0.1)
    update.update(model, copy.deepcopy(model), optimizer, group_episodes(), cfg, Accelerator(cpu=True), 0)
    assert reads == []


def test_the_entropy_bonus_raises_the_policys_entropy_where_the_advantages_are_zero(tiny_llama_dir):
    """With every advantage 0 the policy loss has no gradient: ``entropy_coef`` alone moves the
    weights, and the step it takes raises the entropy the update logs."""
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    flat = [
        [Sample(s.ids, s.start, s.mask, s.old_logprobs, [0.0] * len(s.advantages)) for s in group]
        for group in group_episodes()
    ]
    moved, entropy = {}, {}
    for coef in (0.0, 1.0):
        model = copy.deepcopy(base)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        cfg = GRPOConfig(micro_batch_size=2, entropy_coef=coef, max_grad_norm=1e9)
        before = update.update(model, None, optimizer, flat, cfg, Accelerator(cpu=True), 0)["loss/entropy"]
        probe = torch.optim.SGD(model.parameters(), lr=0.0)
        after = update.update(model, None, probe, flat, cfg, Accelerator(cpu=True), 0)["loss/entropy"]
        moved[coef] = any((p != q).any() for p, q in zip(model.parameters(), base.parameters()))
        entropy[coef] = (before, after)
    assert moved == {0.0: False, 1.0: True}
    assert entropy[0.0][1] == pytest.approx(entropy[0.0][0])
    assert entropy[1.0][1] > entropy[1.0][0] + 1e-3
