"""Ready-made 4-D attention masks for the model calls of sampling and training.

Given a 2-D padding mask, a transformers model builds its 4-D causal mask on every forward
(``masking_utils.create_causal_mask``: about 1 ms on a 2-core CPU). A tiny base's whole
decode step costs a few ms, so sampling 24 tokens spent a good share of its time there.
A 4-D mask passed in is used as it is, so the sampler and the trainer build it themselves:
additive (0 where attended, the dtype's minimum elsewhere), causal, keys masked by padding,
and every query attends at least to itself (a left-padding query would otherwise attend to
nothing). Real tokens never attend to padding, so their outputs equal the 2-D path's
(``tests/policies/test_mask4d.py`` checks logits and log-probs).

Used only for architectures whose attention reads such a mask unchanged (:data:`ARCHS`,
eager or SDPA attention, no sliding window); every other model gets the 2-D mask.
"""

from __future__ import annotations

import weakref
from typing import Any

ARCHS = frozenset({"llama"})
_OK: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def dense_ok(model: Any) -> bool:
    """Whether ``model`` (a transformers model, possibly PEFT-wrapped) takes our 4-D mask."""
    ok = _OK.get(model)
    if ok is None:
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        cfg = getattr(base, "config", None)
        ok = (getattr(cfg, "model_type", None) in ARCHS
              and getattr(cfg, "_attn_implementation", None) in ("sdpa", "eager")
              and not getattr(cfg, "sliding_window", None))
        try:
            _OK[model] = ok
        except TypeError:  # pragma: no cover - not weak-referenceable
            pass
    return ok


def prefill_mask(mask2d: Any, dtype: Any) -> Any:
    """``[B, 1, T, T]`` additive mask for a full forward over ``[B, T]`` tokens."""
    import torch

    t = mask2d.shape[1]
    causal = torch.ones((t, t), dtype=torch.bool, device=mask2d.device).tril_()
    allowed = causal[None, None] & mask2d.bool()[:, None, None, :]
    allowed |= torch.eye(t, dtype=torch.bool, device=mask2d.device)[None, None]
    return additive(allowed, dtype)


def step_mask(mask2d: Any, dtype: Any) -> Any:
    """``[B, 1, 1, L]`` additive mask for one new token attending to ``L`` cached keys
    (the last of which is itself, always attended)."""
    allowed = mask2d.bool()[:, None, None, :]
    return additive(allowed, dtype)


def additive(allowed: Any, dtype: Any) -> Any:
    import torch

    out = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return out.masked_fill_(~allowed, torch.finfo(dtype).min)


def full_mask_for(model: Any, mask2d: Any) -> Any:
    """What to pass as ``attention_mask`` for a full forward of ``model`` over a batch
    with padding mask ``mask2d``: the ready-made 4-D mask where :func:`dense_ok`, else
    ``mask2d`` itself."""
    if not dense_ok(model):
        return mask2d
    return prefill_mask(mask2d, next(iter(model.parameters())).dtype)
