"""GRPO on a LoRA adapter over a frozen base.

One step: ``group_size`` real episodes per card (``ctx.rollout``), rewards from the
verifier, group-normalised advantages (:mod:`._batch`: zero-variance groups dropped and
counted), then ``updates_per_batch`` passes of the clipped objective of :mod:`._loss`
over all turns, each pass one AdamW step (gradients accumulated over micro-batches).

The ratio uses the log-probs the rollout *recorded* while sampling; the first pass also
reports how far the recomputed log-probs are from them (``logprob_max_abs_diff``: it
should be ~1e-5 in fp32; a large value means the policy and the trainer see different
distributions — another temperature, top-p, or tokenization). The reference is the same
model with the adapter disabled (:func:`~ceiling.policies._hf.adapters_off`: PEFT's
``disable_adapter`` without its module walks), so no second copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..rollout import Trajectory
from ._batch import Sample, collate, length_chunks, samples_from_groups
from ._loss import LossConfig, grpo_loss, sequence_logprobs
from ._optim import StepContext, StepResult, register_optimizer


@dataclass
class GRPOSettings:
    lr: float = 1e-3
    group_size: int = 8
    loss: LossConfig = field(default_factory=LossConfig)
    updates_per_batch: int = 1
    micro_batch: int = 64
    max_grad_norm: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    weight_decay: float = 0.0


class GRPO:
    """The GRPO optimizer (see the module doc). ``model`` is a PeftModel whose trainable
    parameters are the adapter's; ``pad_id`` pads batches."""

    name = "grpo"

    def __init__(self, model: Any, settings: GRPOSettings, pad_id: int) -> None:
        self.model = model
        self.s = settings
        self.pad_id = pad_id
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("the model has no trainable parameters (expected a LoRA adapter)")
        self.opt = adamw(self.params, lr=settings.lr, betas=(0.9, 0.99),
                         weight_decay=settings.weight_decay)
        self.device = next(model.parameters()).device
        # train mode only changes what dropout does; switching it walks every module twice
        # per update, a measurable share of a tiny model's step, so it is skipped when the
        # model has no dropout with p > 0 (LoRA dropout 0, Llama's attention dropout 0)
        cfg = getattr(model, "config", None)
        self.train_mode = any(isinstance(m, torch.nn.Dropout) and m.p > 0
                              for m in model.modules()) or \
            float(getattr(cfg, "attention_dropout", 0.0) or 0.0) > 0

    def step(self, ctx: StepContext) -> StepResult:
        groups = ctx.rollout(ctx.cards, self.s.group_size, ctx.seed)
        res = self.update(groups)
        res.trajectories = [t for g in groups for t in g]
        return res

    def _logp(self, batch: Any) -> torch.Tensor:
        logp = sequence_logprobs(self.model, batch.input_ids, batch.attention_mask,
                                 self.s.temperature, keep=batch.keep)
        if self.s.top_p < 1.0:  # pragma: no cover - the training config has no top_p knob
            from .._errors import ConfigError

            raise ConfigError("GRPO recomputes log-probs of the full (temperature-scaled) "
                              "distribution; nucleus sampling would make them disagree",
                              fix="sample with top_p 1.0 when training")
        return logp

    def _ref(self, batch: Any) -> torch.Tensor | None:
        if self.s.loss.beta == 0.0:
            return None
        from ..policies import adapters_off

        with torch.no_grad(), adapters_off(self.model):
            return sequence_logprobs(self.model, batch.input_ids, batch.attention_mask,
                                     self.s.temperature, keep=batch.keep)

    def update(self, groups: Sequence[Sequence[Trajectory]]) -> StepResult:
        """One GRPO update from scored groups (usable without a rollout: tests feed
        hand-made groups)."""
        samples, st = samples_from_groups(groups)
        rewards = st.rewards
        metrics: dict[str, float] = {
            "reward_mean": sum(rewards) / len(rewards) if rewards else 0.0,
            "pass_rate": sum(st.passed) / len(st.passed) if st.passed else 0.0,
            "groups": float(st.groups), "groups_kept": float(st.kept),
            "groups_zero_variance": float(st.zero_variance),
            "infra_errors": float(st.infra_errors), "turns_skipped": float(st.turns_skipped),
            "samples": float(len(samples)),
        }
        if not samples:
            metrics.update(updated=0.0)
            return StepResult([], metrics)
        chunks = length_chunks(samples, self.s.micro_batch)
        batches = [collate(c, self.pad_id, self.device) for c in chunks]
        refs = [self._ref(b) for b in batches]
        total_tok = sum(b.tokens for b in batches)
        trained = fwd = 0
        agg: dict[str, float] = {}
        mismatch = 0.0
        if self.train_mode:
            self.model.train()
        for epoch in range(self.s.updates_per_batch):
            self.opt.zero_grad(set_to_none=True)
            for chunk, b, ref in zip(chunks, batches, refs, strict=True):
                logp = self._logp(b)
                if epoch == 0:
                    d = ((logp.detach() - b.old_logp).abs() * b.mask).max()
                    mismatch = max(mismatch, float(d))
                loss, stats = grpo_loss(logp, b.old_logp, ref, b.advantages, b.mask,
                                        self.s.loss)
                w = (b.tokens / total_tok if self.s.loss.aggregation == "token"
                     else len(chunk) / len(samples))
                (loss * w).backward()
                for k, v in stats.items():
                    if k != "tokens":
                        agg[k] = agg.get(k, 0.0) + v * w / self.s.updates_per_batch
                trained += int(b.attention_mask.sum())
            gnorm = torch.nn.utils.clip_grad_norm_(self.params, self.s.max_grad_norm)
            agg["grad_norm"] = agg.get("grad_norm", 0.0) + float(gnorm) / self.s.updates_per_batch
            self.opt.step()
        if self.train_mode:
            self.model.eval()
        fwd = sum(int(b.attention_mask.sum()) for b in batches) if self.s.loss.beta else 0
        metrics.update(agg)
        metrics.update(updated=1.0, policy_tokens=float(total_tok),
                       logprob_max_abs_diff=mismatch)
        return StepResult([], metrics, trained_tokens=trained, forward_tokens=fwd)

    def state_dict(self) -> dict[str, Any]:
        return {"adamw": self.opt.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.opt.load_state_dict(state["adamw"])


def adamw(params: list[Any], **kw: Any) -> torch.optim.AdamW:
    """AdamW, fused where torch has a fused kernel for the parameters' device (CPU and
    CUDA in torch >= 2.4): one kernel per step instead of ~8 small ops per adapter tensor,
    a few ms of a tiny model's step. Same update rule; the state dict has the same keys,
    so checkpoints move between the two."""
    try:
        return torch.optim.AdamW(params, fused=True, **kw)
    except (RuntimeError, TypeError, ValueError):  # a device or dtype without the kernel
        return torch.optim.AdamW(params, **kw)


def recompute_logprobs(model: Any, samples: Sequence[Sample], pad_id: int,
                       temperature: float = 1.0) -> list[list[float]]:
    """The model's log-probs of each sample's completion tokens (for checks and tests)."""
    b = collate(samples, pad_id, next(model.parameters()).device)
    with torch.no_grad():
        logp = sequence_logprobs(model, b.input_ids, b.attention_mask, temperature, keep=b.keep)
    return [logp[i, :len(s.completion_ids)].tolist() for i, s in enumerate(samples)]


register_optimizer("grpo", lambda model, settings, pad_id, **_: GRPO(model, settings, pad_id))
