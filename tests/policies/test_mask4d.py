"""The faster sampling and training paths give the same numbers as the plain ones: the
ready-made 4-D masks against the model's own 2-D mask path (the trainer's log-probs on a
left-padded batch; sampled tokens and recorded log-probs), and the inverse-CDF token draw
against the distribution it samples."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ceiling.policies import PolicyRequest, SamplingParams, _mask4d, load_policy
from ceiling.policies._hf import HFPolicy
from ceiling.train._loss import sequence_logprobs

PROMPTS = ["task: x\n> ", "task: a much longer prompt than the first one\n> run: ls\n| ok\n> ",
           "hi"]


@pytest.fixture(scope="module")
def policy(tiny_model: Path) -> HFPolicy:
    pol = load_policy(f"hf:{tiny_model}")
    assert isinstance(pol, HFPolicy)
    return pol


def _without_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_mask4d, "dense_ok", lambda model: False)


def test_the_tiny_llama_takes_the_dense_mask_and_others_do_not(policy: HFPolicy) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    assert _mask4d.dense_ok(policy.model)
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=16))
    assert not _mask4d.dense_ok(gpt2)


def test_trainer_logprobs_equal_the_2d_path_on_a_left_padded_batch(
        policy: HFPolicy, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [policy.encode(PolicyRequest(messages=[], prompt=p), 0) for p in PROMPTS]
    width = max(map(len, rows))
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, p in enumerate(rows):
        ids[r, width - len(p):] = torch.tensor(p)
        mask[r, width - len(p):] = 1
    assert int(mask.sum()) < mask.numel()  # some rows are padded
    with torch.no_grad():
        dense = sequence_logprobs(policy.model, ids, mask)
        kept = sequence_logprobs(policy.model, ids, mask, keep=3)
        _without_dense(monkeypatch)
        plain = sequence_logprobs(policy.model, ids, mask)
    real = mask[:, 1:].bool()
    assert torch.isfinite(dense).all()
    assert torch.allclose(dense[real], plain[real], atol=1e-5)
    assert torch.allclose(kept, plain[:, -3:], atol=1e-5)


def test_sampling_equals_the_2d_path(policy: HFPolicy, monkeypatch: pytest.MonkeyPatch) -> None:
    reqs = [PolicyRequest(messages=[], prompt=p) for p in PROMPTS]
    sp = SamplingParams(temperature=1.0, max_new_tokens=12, seed=11)
    dense = policy.generate(reqs, sp)
    _without_dense(monkeypatch)
    plain = policy.generate(reqs, sp)
    for a, b in zip(dense, plain, strict=True):
        assert a.token_ids == b.token_ids and len(a.token_ids) > 0
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4


def test_draw_samples_the_distribution_and_never_a_zero_probability_token() -> None:
    from ceiling.policies._hf import draw

    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2], [0.0, 0.0, 0.0, 0.0, 1.0]])
    rows = probs.repeat(50_000, 1)
    a = draw(rows, torch.Generator().manual_seed(5))
    b = draw(rows, torch.Generator().manual_seed(5))
    assert torch.equal(a, b)  # seeded: the same tokens
    first = torch.bincount(a[0::2], minlength=5).double() / 50_000
    assert first[0] == 0 and first[2] == 0 and torch.equal(a[1::2], torch.full((50_000,), 4))
    # 4 standard errors of a proportion near 0.5 with 50,000 draws is ~0.009
    assert torch.allclose(first[[1, 3, 4]], torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64),
                          atol=0.009)
