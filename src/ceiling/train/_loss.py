"""The GRPO objective, as pure tensor functions.

For each policy-written token t of a sample with advantage A:

    ratio_t = exp(logp_t - old_logp_t)
    pg_t    = -min(ratio_t * A, clip(ratio_t, 1 - eps_low, 1 + eps_high) * A)
    kl_t    = exp(ref_t - logp_t) - (ref_t - logp_t) - 1          (k3 estimator, >= 0)
    loss_t  = pg_t + beta * kl_t

``old_logp`` are the sampling log-probs the rollout recorded; ``ref`` the log-probs of the
frozen base (the adapter switched off). Only tokens under ``mask`` (the tokens the policy
wrote, never prompts or observations) contribute.

Aggregation: ``token`` divides the sum over all masked tokens by their count (DAPO-style:
long replies weigh more); ``sequence`` averages within each sample, then over samples
(the original GRPO paper). Departure from DeepSeekMath GRPO: the advantage is per episode
(every turn of a multi-turn episode gets its episode's advantage), like nanochat's chat_rl.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

Aggregation = Literal["token", "sequence"]


@dataclass(frozen=True)
class LossConfig:
    beta: float = 0.04
    clip_low: float = 0.2
    clip_high: float = 0.2
    aggregation: Aggregation = "token"


def group_advantages(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """``(r - mean) / (std + eps)`` over the last dimension (one row per group)."""
    mean = rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True, unbiased=False) if rewards.shape[-1] > 1 else (
        torch.zeros_like(mean))
    return (rewards - mean) / (std + eps)


def sequence_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      temperature: float = 1.0, keep: int | None = None) -> torch.Tensor:
    """Log-prob of every token given its prefix: ``out[b, t]`` is log p(input_ids[b, t+1]).

    Shape ``[B, T-1]``; with ``keep`` only the last ``keep`` of those, ``[B, keep]`` (the
    log-probs of the last ``keep`` tokens), and the LM head and softmax run on those
    positions only (``logits_to_keep``, when the model's forward takes it). Position ids
    come from the attention mask (cumulative sum), so left- or right-padded batches give
    the same numbers as unpadded ones. Logits are divided by ``temperature`` to score the
    distribution the sampler actually drew from.
    """
    pos = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    T = input_ids.shape[1]
    k = T - 1 if keep is None else min(int(keep), T - 1)
    extra = {"logits_to_keep": k + 1} if keep is not None and _takes_logits_to_keep(model) else {}
    from ..policies import full_mask_for  # a ready-made 4-D mask where the model takes one

    logits = model(input_ids=input_ids, attention_mask=full_mask_for(model, attention_mask),
                   position_ids=pos, use_cache=False, **extra).logits[:, -(k + 1):-1, :].float()
    if temperature != 1.0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, input_ids[:, T - k:].unsqueeze(-1)).squeeze(-1)


def _takes_logits_to_keep(model: Any) -> bool:
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "logits_to_keep" in inspect.signature(base.forward).parameters


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor | None,
              advantages: torch.Tensor, mask: torch.Tensor,
              cfg: LossConfig = LossConfig()) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss (a scalar to minimise) and diagnostics. All token tensors are ``[B, T]``;
    ``advantages`` is ``[B]``; ``mask`` is 1 on policy-written tokens."""
    mask = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype).unsqueeze(-1)
    ratio = torch.exp(logp - old_logp)
    clipped = ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
    pg = -torch.minimum(ratio * adv, clipped * adv)
    if ref_logp is not None and cfg.beta != 0.0:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1.0
    else:
        kl = torch.zeros_like(logp)
    per_tok = pg + cfg.beta * kl
    n_tok = mask.sum().clamp(min=1.0)
    if cfg.aggregation == "token":
        loss = (per_tok * mask).sum() / n_tok
    elif cfg.aggregation == "sequence":
        per_seq = (per_tok * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        loss = per_seq.mean()
    else:  # pragma: no cover - guarded by the config model
        raise ValueError(f"unknown aggregation {cfg.aggregation!r}")
    with torch.no_grad():
        is_clipped = ((ratio < 1.0 - cfg.clip_low) & (adv < 0)) | (
            (ratio > 1.0 + cfg.clip_high) & (adv > 0))
        stats = {
            "loss": float(loss.detach()),
            "kl": float((kl * mask).sum() / n_tok),
            "clip_frac": float((is_clipped.to(mask.dtype) * mask).sum() / n_tok),
            "ratio_mean": float((ratio * mask).sum() / n_tok),
            "tokens": float(mask.sum()),
        }
    return loss, stats
