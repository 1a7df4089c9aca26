"""The trainer's math on hand-computed tensors: advantages, the masked clipped loss, KL."""

import math

import pytest
import torch

from searchgym.agents.train.advantages import (
    degenerate_groups,
    group_advantages,
    igpo_advantages,
    stratified_advantages,
)
from searchgym.agents.train.config import GRPOConfig, load_config
from searchgym.agents.train.loss import (
    LossNorm,
    Sample,
    aggregate,
    collate,
    kl_k3,
    policy_loss,
    token_logprobs,
)
from searchgym.errors import ConfigError


def test_grpo_advantage_is_the_group_z_score_and_dr_grpo_only_centres():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [3.0, 1.0, 2.0, 2.0]])
    # group 0: mean 0.5, unbiased std sqrt(1/3); group 1: mean 2, std sqrt(2/3)
    expected = torch.tensor([[0.5, -0.5, -0.5, 0.5], [1.0, -1.0, 0.0, 0.0]])
    assert torch.allclose(group_advantages(rewards, scale=False), expected)
    std = torch.tensor([[math.sqrt(1 / 3)], [math.sqrt(2 / 3)]])
    assert torch.allclose(group_advantages(rewards), expected / std, atol=1e-5)


def test_a_group_with_equal_rewards_has_zero_advantage_and_is_counted_degenerate():
    rewards = torch.tensor([[0.7, 0.7, 0.7], [0.0, 1.0, 0.0]])
    assert group_advantages(rewards)[0].abs().max() == 0
    assert degenerate_groups(rewards).tolist() == [True, False]


def test_stratified_normalises_within_equal_search_counts_and_blends_with_the_group():
    rewards = torch.tensor([[1.0, 0.0, 0.5, 0.5, 2.0]])
    strata = torch.tensor([[1, 1, 2, 2, 3]])  # two pairs and a singleton
    within = torch.tensor([[0.7071068, -0.7071068, 0.0, 0.0, 0.0]])
    assert torch.allclose(stratified_advantages(rewards, strata, alpha=1.0), within, atol=1e-5)
    blended = stratified_advantages(rewards, strata, alpha=0.25)
    assert torch.allclose(blended, 0.25 * within + 0.75 * group_advantages(rewards), atol=1e-5)
    assert torch.allclose(stratified_advantages(rewards, strata, alpha=0.0), group_advantages(rewards))


def test_igpo_z_scores_all_turns_of_a_group_then_sums_later_turns():
    # episode 0: gains 0.2 then outcome 1; episode 1: gain 0.0 then outcome 0
    turns = [[[0.2, 1.0], [0.0, 0.0]]]
    pooled = torch.tensor([0.2, 1.0, 0.0, 0.0])
    z = ((pooled - pooled.mean()) / pooled.std()).tolist()
    out = igpo_advantages(turns)
    assert out[0][0] == pytest.approx([z[0] + z[1], z[1]], abs=1e-5)
    assert out[0][1] == pytest.approx([z[2] + z[3], z[3]], abs=1e-5)
    discounted = igpo_advantages(turns, gamma=0.5)
    assert discounted[0][0] == pytest.approx([z[0] + 0.5 * z[1], z[1]], abs=1e-5)


def test_igpo_of_a_group_with_equal_turn_rewards_is_zero():
    assert igpo_advantages([[[1.0], [1.0, 1.0]]]) == [[[0.0], [0.0, 0.0]]]


def test_k3_kl_matches_the_formula_and_is_zero_at_equality():
    logp, ref = torch.tensor([-0.5, -2.0, -1.0]), torch.tensor([-1.0, -1.0, -1.0])
    d = ref - logp
    assert torch.allclose(kl_k3(logp, ref), torch.exp(d) - d - 1)
    assert kl_k3(ref, ref).abs().max() == 0
    assert (kl_k3(logp, ref) >= 0).all()


def test_aggregations_on_hand_numbers():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    norm = LossNorm(episodes=2, tokens=4, max_tokens=5)
    assert aggregate(values, mask, "token_mean", norm) == pytest.approx(10 / 4)
    assert aggregate(values, mask, "grpo", norm) == pytest.approx((6 / 3 + 4 / 1) / 2)
    assert aggregate(values, mask, "dr_grpo", norm) == pytest.approx(10 / (2 * 5))


def test_clipped_loss_on_hand_numbers():
    # ratios e^0.5 = 1.65 (clipped for A > 0), e^-0.5 = 0.61 (clipped for A < 0), 1.0
    logp = torch.tensor([[0.5, -0.5, 0.0]])
    old = torch.zeros(1, 3)
    adv = torch.tensor([[1.0, -1.0, 2.0]])
    mask = torch.ones(1, 3)
    loss, stats = policy_loss(logp, old, adv, mask, norm=LossNorm(1, 3, 3), clip_low=0.2, clip_high=0.28)
    expected = -(1.28 * 1.0 + 0.8 * -1.0 + 1.0 * 2.0) / 3
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert stats["clipped"] == 2 and stats["tokens"] == 3
    # pessimistic side: a ratio below 1 - eps with a positive advantage is not clipped
    loss, stats = policy_loss(
        torch.tensor([[-0.5]]), torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), norm=LossNorm(1, 1, 1)
    )
    assert loss.item() == pytest.approx(-math.exp(-0.5)) and stats["clipped"] == 0


def test_truncated_importance_weights_on_hand_numbers():
    """With ``tis_cap`` the old log-probs are the model's own (ratio 1, nothing clipped) and each
    token weighs min(p_old / p_sampler, cap): the sampler here made token 0 e^0.5 times likelier
    than the model does, and token 1 e^1 times less likely (capped at 2)."""
    logp = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    sampler = torch.tensor([[-0.5, -3.0, -0.5]])
    adv, mask = torch.tensor([[1.0, 1.0, -1.0]]), torch.ones(1, 3)
    loss, stats = policy_loss(
        logp, logp.detach(), adv, mask, norm=LossNorm(1, 3, 3), sampler_logp=sampler, tis_cap=2.0
    )
    weights = [math.exp(-0.5), 2.0, 1.0]
    assert loss.item() == pytest.approx(-(weights[0] + weights[1] - weights[2]) / 3, abs=1e-6)
    assert stats["clipped"] == 0 and stats["tis"] == pytest.approx(sum(weights), abs=1e-6)
    loss.backward()  # the weights are constants: d loss / d logp = -weight x advantage / 3
    assert logp.grad.tolist()[0] == pytest.approx([-w * a / 3 for w, a in zip(weights, [1, 1, -1])])
    with pytest.raises(ConfigError, match="tis_cap must be 0 \\(off\\) or >= 1 with updates_per_step: 1"):
        GRPOConfig(tis_cap=2.0, updates_per_step=2)


def test_kl_term_is_added_with_its_coefficient():
    logp, ref = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -1.0]])
    args = dict(norm=LossNorm(1, 2, 2), ref_logp=ref)
    plain, _ = policy_loss(logp, logp.detach(), torch.zeros(1, 2), torch.ones(1, 2), **args)
    with_kl, stats = policy_loss(
        logp, logp.detach(), torch.zeros(1, 2), torch.ones(1, 2), kl_coef=0.1, **args
    )
    assert plain.item() == 0.0
    assert with_kl.item() == pytest.approx(0.1 * kl_k3(logp, ref).mean().item(), abs=1e-6)
    assert stats["kl"] == pytest.approx(kl_k3(logp, ref).sum().item(), abs=1e-6)


def test_masked_tokens_get_exactly_zero_gradient():
    logp = torch.tensor([[-0.3, -1.2, -0.7, -2.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    for how in ("token_mean", "grpo", "dr_grpo"):
        logp.grad = None
        loss, _ = policy_loss(
            logp,
            torch.full((1, 4), -1.0),
            torch.tensor([[1.0, 5.0, -1.0, 3.0]]),
            mask,
            norm=LossNorm(1, 2, 4),
            aggregation=how,
            ref_logp=torch.zeros(1, 4),
            kl_coef=0.5,
        )
        loss.backward()
        assert logp.grad[0, 1] == 0 and logp.grad[0, 3] == 0, how
        assert logp.grad[0, 0] != 0 and logp.grad[0, 2] != 0, how


def test_micro_batch_losses_add_up_to_the_full_batch_loss():
    g = torch.Generator().manual_seed(0)
    logp, old, adv = (torch.randn(6, 5, generator=g) * 0.1 for _ in range(3))
    mask = (torch.rand(6, 5, generator=g) > 0.3).float()
    norm = LossNorm(episodes=6, tokens=int(mask.sum()), max_tokens=5)
    for how in ("token_mean", "grpo", "dr_grpo"):
        full, _ = policy_loss(logp, old, adv, mask, norm=norm, aggregation=how)
        parts = sum(
            policy_loss(
                logp[i : i + 2], old[i : i + 2], adv[i : i + 2], mask[i : i + 2], norm=norm, aggregation=how
            )[0]
            for i in range(0, 6, 2)
        )
        assert parts.item() == pytest.approx(full.item(), abs=1e-6), how


def test_collate_aligns_each_token_with_the_position_that_predicts_it():
    samples = [
        Sample([1, 2, 3, 4], 2, [1, 0], [-0.1, 0.0], [0.5, 0.5]),
        Sample([7, 8], 1, [1], [-0.2], [-1.0]),
    ]
    batch = collate(samples, pad_id=0)
    assert batch["input_ids"].tolist() == [[1, 2, 3, 4], [7, 8, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    # position 1 predicts token 3 (the first episode token of sample 0), position 0 predicts 8
    assert batch["mask"].tolist() == [[0, 1, 0], [1, 0, 0]]
    assert batch["old_logprobs"][0, 1] == pytest.approx(-0.1) and batch["old_logprobs"][
        1, 0
    ] == pytest.approx(-0.2)
    assert batch["advantages"].tolist() == [[0.0, 0.5, 0.5], [-1.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="cover ids"):
        collate([Sample([1, 2], 1, [1, 1], [0.0], [0.0])], pad_id=0)


class Bigram(torch.nn.Module):
    """Next-token logits from the current token alone; with ``logits_to_keep`` like transformers."""

    def __init__(self, with_keep: bool):
        super().__init__()
        torch.manual_seed(0)
        self.table = torch.nn.Embedding(10, 10)
        if with_keep:
            self.forward = self.forward_keep

    def forward(self, input_ids, attention_mask):
        return type("Out", (), {"logits": self.table(input_ids)})

    def forward_keep(self, input_ids, attention_mask, logits_to_keep=0):
        return type("Out", (), {"logits": self.table(input_ids)[logits_to_keep]})


@pytest.mark.parametrize("with_keep", [False, True])
def test_token_logprobs_match_a_hand_softmax_where_the_mask_is_set(with_keep):
    model = Bigram(with_keep)
    ids = torch.tensor([[1, 2, 3], [4, 5, 0]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    logp, entropy = token_logprobs(model, ids, torch.ones_like(ids), mask, temperature=0.5, with_entropy=True)
    by_hand = torch.log_softmax(model.table(torch.tensor(1)) / 0.5, -1)[2]
    assert logp[0, 0].item() == pytest.approx(by_hand.item(), abs=1e-5)
    assert logp[0, 1] == 0 and logp[1, 1] == 0  # not computed where the mask is 0
    p = torch.softmax(model.table(torch.tensor([1, 4])) / 0.5, -1)
    assert entropy[:, 0].tolist() == pytest.approx((-(p * p.log()).sum(-1)).tolist(), abs=1e-4)
    assert entropy[:, 1].tolist() == [0.0, 0.0]


def test_config_rejects_bad_values_and_unknown_keys_with_a_hint():
    with pytest.raises(ConfigError, match="group_size must be >= 2"):
        GRPOConfig(group_size=1)
    with pytest.raises(ConfigError, match="advantage must be one of"):
        GRPOConfig(advantage="ppo")
    with pytest.raises(ConfigError, match="unknown reward weight"):
        GRPOConfig(rewards={"per_serch": 0.1})
    with pytest.raises(ConfigError, match=r"unknown reward weight\(s\) \['per_turn'\]"):
        GRPOConfig(rewards={"per_turn": 0.02})  # a planner's weight; the default env is not one
    planner_weights = {"per_search": 0.1, "per_turn": 0.02}
    planner = GRPOConfig(env="searchgym/FictionalQA-Planner-v0", rewards=planner_weights)
    assert planner.rewards["per_turn"] == 0.02
    with pytest.raises(ConfigError, match=r"group_sise \(did you mean group_size\?\)"):
        load_config(None, ["group_sise=4"])
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["steps"])
    with pytest.raises(ConfigError, match="warm_start_agent must be a scripted agent"):
        GRPOConfig(warm_start_agent="hf:smollm2-135m-instruct")
    with pytest.raises(ConfigError, match=r"unknown chat template 'qwen25'; did you mean 'qwen2_5'\?"):
        GRPOConfig(chat_template="qwen25")
    with pytest.raises(ConfigError, match="chat template file nowhere/t.jinja does not exist"):
        GRPOConfig(chat_template="nowhere/t.jinja")
    with pytest.raises(ConfigError, match="steps must be >= 0, got -1"):
        GRPOConfig(steps=-1)
    with pytest.raises(ConfigError, match=r"policy 'cpu' takes no 'max_batch' \(policy_kwargs\)"):
        GRPOConfig(policy="cpu", policy_kwargs={"max_batch": 32})


def test_config_reads_yaml_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("steps: 5\nenv_kwargs: {hops: [2]}\nrewards: {per_search: 0.05}\n")
    cfg = load_config(
        path, ["steps=7", "advantage=igpo", "rewards.terms.info_gain=1.5", "env_kwargs.top_k=1"]
    )
    assert (cfg.steps, cfg.env_kwargs, cfg.rewards, cfg.advantage) == (
        7,
        {"hops": [2], "top_k": 1},
        {"per_search": 0.05, "terms": {"info_gain": 1.5}},
        "igpo",
    )
    assert (cfg.trainer_terms, cfg.env_rewards) == ({"info_gain": 1.5}, {"per_search": 0.05})
    with pytest.raises(
        ConfigError, match=r"config key\(s\) moved: info_gain \(now rewards: \{terms: \{info_gain"
    ):
        load_config(path, ["info_gain=1.0"])
    with pytest.raises(ConfigError, match="advantage: igpo rewards each turn with the trainer's terms"):
        load_config(path, ["advantage=igpo"])
    with pytest.raises(ConfigError, match="--set steps.x: steps is not a mapping"):
        load_config(path, ["steps.x=1"])
    with pytest.raises(ConfigError, match="the weight of reward term 'info_gain' must be a finite number"):
        load_config(path, ["rewards.terms.info_gain=high"])


def test_eval_env_kwargs_apply_to_the_evaluations_only():
    from searchgym.agents.train.schedule import make_env

    cfg = GRPOConfig(env_kwargs={"hops": [1, 2], "n_passages": 300}, eval_env_kwargs={"hops": [2]})
    trained, evaluated = make_env(cfg, cfg.train_split), make_env(cfg, cfg.eval_split)
    assert {t.metadata["hops"] for t in trained.unwrapped.tasks} == {1, 2}
    assert {t.metadata["hops"] for t in evaluated.unwrapped.tasks} == {2}


def test_chunked_logprobs_and_their_gradients_match_an_unchunked_log_softmax(monkeypatch, tiny_llama_dir):
    from transformers import AutoModelForCausalLM

    from searchgym.agents.train import loss

    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    ids = torch.randint(0, 1000, (2, 12), generator=torch.Generator().manual_seed(0))
    mask = (torch.arange(11) % 3 != 0).float().expand(2, 11)

    def grads(chunk, autocast=False):
        monkeypatch.setattr(loss, "LOGIT_CHUNK", chunk)
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logp, _ = token_logprobs(model, ids, torch.ones_like(ids), mask, temperature=0.7)
        logp.sum().backward()
        return logp.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])

    by_hand = torch.log_softmax(model(ids).logits[:, :-1].float() / 0.7, -1)
    by_hand = by_hand.gather(2, ids[:, 1:, None])[..., 0] * mask
    logp, grad = grads(1024)
    assert torch.allclose(logp, by_hand.detach(), atol=1e-5)
    chunked, chunked_grad = grads(3)
    assert torch.allclose(chunked, logp, atol=1e-6) and torch.allclose(chunked_grad, grad, atol=1e-5)
    # bfloat16 autocast (what bf16: true does, on CPU too): finite and close to float32
    low, low_grad = grads(1024, autocast=True)
    assert torch.isfinite(low).all() and torch.isfinite(low_grad).all()
    assert (low - logp).abs().max() < 0.05 * logp.abs().max()
    assert torch.nn.functional.cosine_similarity(low_grad, grad, dim=0) > 0.99


def test_target_logits_are_the_same_where_transformers_takes_no_boolean_mask(monkeypatch, tiny_llama_dir):
    """transformers 5.17 cannot keep a [batch, length] boolean mask of logits (seen on a GPU
    machine's image): the union of the rows' positions is kept, then each row's are picked."""
    from transformers import AutoModelForCausalLM

    from searchgym.agents.train import scoring

    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    ids = torch.randint(0, 1000, (2, 12), generator=torch.Generator().manual_seed(0))
    mask = torch.zeros(2, 12, dtype=torch.bool)
    mask[0, [2, 3, 7]], mask[1, [5, 11]] = True, True
    with torch.no_grad():
        masked = scoring.target_logits(model, ids, torch.ones_like(ids), mask)
        monkeypatch.setattr(scoring, "masks_logits", lambda: False)
        shared = scoring.target_logits(model, ids, torch.ones_like(ids), mask)
        whole = model(ids).logits[:, :-1][mask[:, 1:]]
    assert masked.shape == (5, whole.shape[-1]) and torch.allclose(shared, masked, atol=1e-5)
    assert torch.allclose(whole.float(), masked, atol=1e-5)
