"""The GRPO objective and update on hand-made batches (no sandbox, no rollout runner)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ceiling.policies import PolicyRequest, SamplingParams
from ceiling.rollout import Trajectory, Turn
from ceiling.train import LossConfig, group_advantages, grpo_loss
from ceiling.train._batch import Sample, collate, samples_from_groups
from ceiling.train._grpo import GRPO, GRPOSettings, recompute_logprobs

from .conftest import make_model


def test_group_advantages_normalise_each_group() -> None:
    a = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]]))
    assert torch.allclose(a[0], torch.tensor([1.0, -1.0, -1.0, 1.0]), atol=1e-3)
    assert torch.all(a[1] == 0)


def _toks(B: int = 2, T: int = 5, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(B, T, generator=g) - 0.1
    return logp, logp.clone(), logp.clone()


def test_on_policy_loss_is_minus_mean_advantage_and_kl_zero() -> None:
    logp, old, ref = _toks()
    mask = torch.ones_like(logp)
    adv = torch.tensor([1.0, -0.5])
    loss, st = grpo_loss(logp, old, ref, adv, mask, LossConfig(beta=0.1))
    assert loss.item() == pytest.approx(-0.25, abs=1e-6)
    assert st["kl"] == pytest.approx(0.0, abs=1e-7)
    assert st["ratio_mean"] == pytest.approx(1.0)


def test_gradient_raises_logprob_of_positive_advantage_tokens() -> None:
    logp, old, ref = _toks()
    logp.requires_grad_(True)
    mask = torch.ones_like(logp)
    loss, _ = grpo_loss(logp, old, ref, torch.tensor([1.0, -1.0]), mask, LossConfig(beta=0.0))
    loss.backward()
    assert torch.all(logp.grad[0] < 0) and torch.all(logp.grad[1] > 0)  # descent raises row 0


def test_masked_tokens_do_not_matter() -> None:
    logp, old, ref = _toks()
    mask = torch.tensor([[0, 1, 1, 0, 0], [0, 0, 1, 1, 1]], dtype=torch.float32)
    adv = torch.tensor([0.7, -1.3])
    base, _ = grpo_loss(logp, old - 0.05, ref, adv, mask)
    logp2 = logp.clone()
    logp2[mask == 0] = -9.0
    other, _ = grpo_loss(logp2, old - 0.05, ref, adv, mask)
    assert base.item() == pytest.approx(other.item())


def test_token_and_sequence_aggregation_differ_on_unequal_lengths() -> None:
    logp = torch.zeros(2, 4)
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.float32)
    adv = torch.tensor([1.0, -1.0])
    tok, _ = grpo_loss(logp, logp, None, adv, mask, LossConfig(aggregation="token"))
    seq, _ = grpo_loss(logp, logp, None, adv, mask, LossConfig(aggregation="sequence"))
    assert tok.item() == pytest.approx((-1 + 4) / 5)  # every token counts once
    assert seq.item() == pytest.approx(0.0)  # every sequence counts once


def test_ratio_is_clipped_for_positive_advantage() -> None:
    old = torch.zeros(1, 3)
    logp = torch.full((1, 3), 0.5, requires_grad=True)  # ratio e^0.5 > 1.2
    loss, st = grpo_loss(logp, old, None, torch.tensor([1.0]), torch.ones(1, 3),
                         LossConfig(beta=0.0, clip_high=0.2))
    loss.backward()
    assert torch.all(logp.grad == 0)
    assert st["clip_frac"] == 1.0
    assert loss.item() == pytest.approx(-1.2)


def test_k3_kl_is_positive_away_from_reference() -> None:
    logp = torch.log(torch.tensor([[0.5, 0.2]]))
    ref = torch.log(torch.tensor([[0.3, 0.4]]))
    _, st = grpo_loss(logp, logp, ref, torch.tensor([0.0]), torch.ones(1, 2), LossConfig())
    assert st["kl"] > 0


def test_collate_aligns_completion_mask_and_old_logprobs() -> None:
    s = [Sample([5, 6, 7], [8, 9], [-0.1, -0.2], 1.0), Sample([5], [8, 9, 3], [-1, -2, -3], -1.0)]
    b = collate(s, pad_id=0)
    # prompts left-padded, completions right-padded: completions all start at column 3
    assert b.input_ids.tolist() == [[5, 6, 7, 8, 9, 0], [0, 0, 5, 8, 9, 3]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1, 1, 0], [0, 0, 1, 1, 1, 1]]
    assert b.mask.tolist() == [[1, 1, 0], [1, 1, 1]]
    assert b.old_logp.flatten().tolist() == pytest.approx([-0.1, -0.2, 0.0, -1, -2, -3])
    assert b.tokens == 5 and b.keep == 3


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_recomputed_logprobs_match_the_hf_policy_recorded_ones(tiny_tok: Any,
                                                               temperature: float) -> None:
    from ceiling.basemodel.build import prompt_of
    from ceiling.policies._hf import HFPolicy

    model = make_model(tiny_tok, seed=1)
    # a non-zero adapter, so that adapter and base differ
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    pol = HFPolicy("unused", model=model, tokenizer=tiny_tok)
    reqs = [PolicyRequest(messages=[], prompt=prompt_of(t))
            for t in ("Copy fox.txt to owl.md.", "Delete the file cat.log.", "Move a to b.")]
    gens = pol.generate(reqs, SamplingParams(temperature=temperature, max_new_tokens=12,
                                             stop=("\n",), seed=3))
    samples = [Sample(g.prompt_token_ids, g.token_ids, g.logprobs, 0.0) for g in gens]
    again = recompute_logprobs(model, samples, tiny_tok.pad_token_id, temperature)
    worst = max(abs(a - b) for s, r in zip(samples, again, strict=True)
                for a, b in zip(s.old_logprobs, r, strict=True))
    assert all(len(s.completion_ids) > 0 for s in samples)
    assert worst < 1e-4


def _traj(eid: str, reward: float, turns: list[Turn], outcome: str = "failed") -> Trajectory:
    return Trajectory(episode_id=eid, card_id="c", card_hash="h", template="t", type="terminal_ops",
                      horizon="short", difficulty=1, split="train", feasible=True, faults=False,
                      seed=0, sample=0, policy="p", harness_fingerprint="f", sampling={},
                      turns=turns, outcome=outcome, reward=reward, passed=reward > 0)


def test_groups_without_variance_and_infra_errors_are_dropped() -> None:
    t = Turn(text="x", token_ids=[1], logprobs=[-1.0], prompt_token_ids=[2])
    same = [_traj("a", 1.0, [t]), _traj("b", 1.0, [t])]
    mixed = [_traj("c", 1.0, [t]), _traj("d", 0.0, [t, t]), _traj("e", 0.0, [t], "infra_error")]
    samples, st = samples_from_groups([same, mixed])
    assert (st.groups, st.kept, st.zero_variance, st.infra_errors) == (2, 1, 1, 1)
    assert [s.episode_id for s in samples] == ["c", "d", "d"]
    assert samples[0].advantage > 0 > samples[1].advantage


def test_grpo_update_moves_only_the_adapter_toward_rewarded_replies(tiny_tok: Any) -> None:
    from ceiling.basemodel.build import prompt_of

    model = make_model(tiny_tok, seed=2)
    base_before = {n: p.detach().clone() for n, p in model.named_parameters()
                   if not p.requires_grad}
    prompt = tiny_tok(prompt_of("Delete the file fox.txt."))["input_ids"]
    good = tiny_tok("run: rm fox.txt\n")["input_ids"]
    bad = tiny_tok("run: touch fox.txt\n")["input_ids"]

    def turn(ids: list[int]) -> Turn:
        lp = recompute_logprobs(model, [Sample(prompt, ids, [0.0] * len(ids), 0)],
                                tiny_tok.pad_token_id)[0]
        return Turn(text="", token_ids=ids, logprobs=lp, prompt_token_ids=prompt)

    def seq_lp(ids: list[int]) -> float:
        return sum(recompute_logprobs(model, [Sample(prompt, ids, [0.0] * len(ids), 0)],
                                      tiny_tok.pad_token_id)[0])

    before = seq_lp(good) - seq_lp(bad)
    opt = GRPO(model, GRPOSettings(lr=1e-2, loss=LossConfig(beta=0.04)), tiny_tok.pad_token_id)
    for _ in range(5):
        group = [_traj("g", 1.0, [turn(good)], "solved"), _traj("b", 0.0, [turn(bad)])]
        res = opt.update([group])
        assert res.metrics["updated"] == 1.0 and res.trained_tokens > 0
    assert res.metrics["logprob_max_abs_diff"] < 1e-4
    assert seq_lp(good) - seq_lp(bad) > before + 0.5
    for n, p in model.named_parameters():
        if n in base_before:
            assert torch.equal(p, base_before[n]), n
