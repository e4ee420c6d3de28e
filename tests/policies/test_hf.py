"""The hf policy on a tiny random Llama: batching, stop strings, seeds and log-probs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ceiling.policies import PolicyRequest, SamplingParams, load_policy
from ceiling.policies._hf import HFPolicy, top_p_mask

PROMPTS = ["task: x\n> ", "task: a much longer prompt than the first\n> run: ls\n| [ok]\n> "]


@pytest.fixture(scope="module")
def policy(tiny_model: Path) -> HFPolicy:
    pol = load_policy(f"hf:{tiny_model}")
    assert isinstance(pol, HFPolicy)
    return pol


def _reqs() -> list[PolicyRequest]:
    return [PolicyRequest(messages=[], prompt=p) for p in PROMPTS] + [
        PolicyRequest(messages=[{"role": "user", "content": "hi"}])]


def test_batch_shapes_and_seeded_replay(policy: HFPolicy) -> None:
    sp = SamplingParams(temperature=1.0, max_new_tokens=12, seed=7)
    a = policy.generate(_reqs(), sp)
    b = policy.generate(_reqs(), sp)
    assert len(a) == 3
    for g, h in zip(a, b, strict=True):
        assert g.error is None and g.token_ids == h.token_ids
        assert len(g.token_ids) == len(g.logprobs) > 0
        assert all(lp <= 0 for lp in g.logprobs)
        assert g.finish_reason in ("stop", "length")
    assert a[0].prompt_token_ids == policy.encode(_reqs()[0])


def test_recorded_logprobs_match_an_unbatched_forward(policy: HFPolicy) -> None:
    sp = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=10, seed=3)
    for g in policy.generate(_reqs(), sp):
        ids = torch.tensor([g.prompt_token_ids + g.token_ids])
        with torch.no_grad():
            logits = policy.model(ids).logits[0].float()
        p = len(g.prompt_token_ids)
        z = top_p_mask(logits[p - 1:-1] / 0.7, 0.9)
        want = torch.log_softmax(z, -1).gather(-1, torch.tensor(g.token_ids)[:, None])[:, 0]
        assert torch.allclose(want, torch.tensor(g.logprobs), atol=1e-4)


def test_greedy_is_deterministic_and_stop_strings_cut(policy: HFPolicy) -> None:
    sp = SamplingParams(temperature=0.0, max_new_tokens=30)
    g1, g2 = (policy.generate(_reqs()[:1], sp)[0] for _ in range(2))
    assert g1.token_ids == g2.token_ids
    # stop on the first character the greedy reply produced: text is cut before it
    full = policy.tokenizer.decode(g1.token_ids, skip_special_tokens=True)
    assert full
    ch = full[len(full) // 2]
    cut = policy.generate(_reqs()[:1], SamplingParams(temperature=0.0, max_new_tokens=30,
                                                      stop=(ch,)))[0]
    assert ch not in cut.text and cut.finish_reason == "stop"
    assert len(cut.token_ids) <= len(g1.token_ids)
    assert cut.token_ids == g1.token_ids[:len(cut.token_ids)]


def test_top_p_mask_keeps_the_nucleus() -> None:
    z = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = torch.isfinite(top_p_mask(z, 0.8))[0].tolist()
    assert kept == [True, True, False, False]
    assert torch.isfinite(top_p_mask(z, 1e-6))[0].tolist() == [True, False, False, False]


def test_chat_needs_a_template(tiny_model: Path, tmp_path: Path) -> None:
    pol = load_policy(f"hf:{tiny_model}")
    assert isinstance(pol, HFPolicy)
    pol.tokenizer.chat_template = None
    g = pol.generate([PolicyRequest(messages=[{"role": "user", "content": "x"}])],
                     SamplingParams(max_new_tokens=2))[0]
    assert g.error and "chat template" in g.error


def test_live_model_keeps_its_mode_and_device(policy: HFPolicy) -> None:
    live = HFPolicy("live", model=policy.model, tokenizer=policy.tokenizer, spec="hf:live")
    assert live.device == next(policy.model.parameters()).device
    policy.model.train()
    try:
        live.generate(_reqs()[:1], SamplingParams(max_new_tokens=2, seed=0))
        assert policy.model.training
    finally:
        policy.model.eval()


def test_peft_adapter_spec(tiny_model: Path, tmp_path: Path) -> None:
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    cfg = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, cfg).save_pretrained(tmp_path / "adapter")
    pol = load_policy(f"hf:{tiny_model}+{tmp_path / 'adapter'}")
    assert isinstance(pol, HFPolicy) and isinstance(pol.model, PeftModel)
    plain = load_policy(f"hf:{tiny_model}")
    sp = SamplingParams(temperature=0.0, max_new_tokens=6)
    a = pol.generate(_reqs()[:1], sp)[0]
    b = plain.generate(_reqs()[:1], sp)[0]
    assert a.logprobs != b.logprobs  # the adapter changes the distribution
