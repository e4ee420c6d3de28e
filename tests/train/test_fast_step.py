"""The faster GRPO step keeps its numbers: log-probs of only the completion positions equal
the full computation's (left-padded prompts included), and sampling through merged LoRA
weights leaves the base weights bit-identical and records the unmerged model's log-probs."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ceiling.policies import PolicyRequest, SamplingParams, merged_lora
from ceiling.policies._hf import HFPolicy
from ceiling.train import sequence_logprobs
from ceiling.train._batch import Sample, collate

from .conftest import make_model


def _adapted(tok: Any) -> Any:
    model = make_model(tok, seed=2)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    return model.eval()


def test_keep_scores_equal_the_full_sequence_scores(tiny_tok: Any) -> None:
    model = _adapted(tiny_tok)
    samples = [Sample([5, 6, 7, 8, 9, 10], [11, 12], [0.0, 0.0], 1.0),
               Sample([5], [8, 9, 3, 4], [0.0] * 4, -1.0),
               Sample([7, 7, 7], [9], [0.0], 0.5)]
    b = collate(samples, pad_id=int(tiny_tok.pad_token_id))
    with torch.no_grad():
        full = sequence_logprobs(model, b.input_ids, b.attention_mask)
        kept = sequence_logprobs(model, b.input_ids, b.attention_mask, keep=b.keep)
        for i, s in enumerate(samples):  # each sample alone, unpadded
            ids = torch.tensor([s.prompt_ids + s.completion_ids])
            alone = sequence_logprobs(model, ids, torch.ones_like(ids))[0, -len(s.completion_ids):]
            c = len(s.completion_ids)
            assert torch.allclose(kept[i, :c], alone, atol=1e-5), (i, kept[i, :c], alone)
    assert kept.shape == (3, b.keep)
    assert torch.allclose(kept, full[:, -b.keep:], atol=1e-6)
    assert torch.isfinite(kept).all()


def test_merged_sampling_restores_the_base_exactly(tiny_tok: Any) -> None:
    from ceiling.basemodel.build import prompt_of

    model = _adapted(tiny_tok)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    grads = {n: p.requires_grad for n, p in model.named_parameters()}
    x = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        unmerged = model(input_ids=x).logits
        with merged_lora(model):
            merged = model(input_ids=x).logits
            w = model.base_model.model.model.layers[0].self_attn.q_proj.base_layer.weight
            assert not torch.equal(w, before[
                "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"])
    assert torch.allclose(merged, unmerged, atol=1e-5)
    for n, p in model.named_parameters():  # bit-identical, trainable flags unchanged
        assert torch.equal(p, before[n]), n
        assert p.requires_grad == grads[n], n
    pol = HFPolicy("unused", model=model, tokenizer=tiny_tok)
    gens = pol.generate([PolicyRequest(messages=[], prompt=prompt_of("Copy a.txt to b.md."))],
                        SamplingParams(temperature=1.0, max_new_tokens=8, seed=1))
    assert gens[0].token_ids
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n
    with torch.no_grad():  # the merged model's recorded log-probs are the adapter's
        g = gens[0]
        ids = torch.tensor([g.prompt_token_ids + g.token_ids])
        again = sequence_logprobs(model, ids, torch.ones_like(ids), keep=len(g.token_ids))
    assert max(abs(a - b) for a, b in zip(again[0].tolist(), g.logprobs, strict=True)) < 1e-4


def test_length_chunks_cut_padding_and_keep_the_update(tiny_tok: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from ceiling.rollout import Trajectory, Turn
    from ceiling.train import _grpo
    from ceiling.train._batch import length_chunks
    from ceiling.train._grpo import GRPO, GRPOSettings
    from ceiling.train._loss import LossConfig
    from ceiling.verify import Outcome

    rng = torch.Generator().manual_seed(0)
    lens = [1, 2, 2, 3, 3, 3, 4, 20, 22, 24, 2, 3, 1, 23, 3, 2]
    samples = [Sample([5, 6, 7][: 1 + i % 3], list(range(8, 8 + n)), [-1.0] * n, 1.0)
               for i, n in enumerate(lens)]
    chunks = length_chunks(samples, micro_batch=64)
    assert sorted(id(s) for c in chunks for s in c) == sorted(map(id, samples))
    padded = sum(len(c) * (max(len(s.prompt_ids) for s in c) +
                           max(len(s.completion_ids) for s in c)) for c in chunks)
    assert len(chunks) >= 2 and padded < len(samples) * (3 + 24) * 0.6
    assert all(len(c) <= 3 for c in length_chunks(samples, micro_batch=3))

    def groups(model: Any) -> list[list[Trajectory]]:
        out = []
        for g in range(4):
            trajs = []
            for j in range(4):
                s = samples[4 * g + j]
                ids = [int(x) for x in torch.randint(8, 40, (len(s.completion_ids),),
                                                     generator=rng)]
                lp = _grpo.recompute_logprobs(model, [Sample(s.prompt_ids, ids, [0.0] * len(ids), 0)],
                                              int(tiny_tok.pad_token_id))[0]
                r = float(j % 2)
                trajs.append(Trajectory(
                    episode_id=f"{g}#{j}", card_id=str(g), card_hash="", template=None,
                    type="bench", horizon="short", difficulty=1, split="train", feasible=True,
                    faults=False, seed=0, sample=j, policy="t", harness_fingerprint="",
                    sampling={}, reward=r, passed=r >= 1, outcome=Outcome.FAILED,
                    turns=[Turn(text="", token_ids=ids, logprobs=lp,
                                prompt_token_ids=s.prompt_ids)]))
            out.append(trajs)
        return out

    grads = {}
    for mode in ("chunked", "one"):
        if mode == "one":
            monkeypatch.setattr(_grpo, "length_chunks", lambda s, mb: [list(s)])
        model = make_model(tiny_tok, seed=3)
        opt = GRPO(model, GRPOSettings(lr=1e-2, loss=LossConfig(beta=0.04)),
                   int(tiny_tok.pad_token_id))
        rng.manual_seed(1)
        opt.update(groups(model))
        grads[mode] = [p.grad.clone() for p in opt.params]
    for a, b in zip(grads["chunked"], grads["one"], strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)
    assert any(float(g.abs().max()) > 0 for g in grads["one"])
