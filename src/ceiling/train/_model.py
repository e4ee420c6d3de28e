"""Loading the frozen base and attaching the trainable LoRA adapter.

The base is loaded with ``AutoModelForCausalLM.from_pretrained`` — the same path a user's
Hugging Face model takes — from ``builtin:NAME``, ``hf:PATH`` or a plain folder. Its
weights are never written: all training happens in the adapter, and the SHA-256 of the
base weight files (:func:`ceiling.basemodel.weights_sha256`) goes into every checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._errors import ConfigError, PolicyError

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def base_path(spec: str) -> Path:
    """``builtin:tiny`` / ``tiny`` / ``hf:PATH`` / ``PATH`` -> a local model folder."""
    from ..basemodel import BASES, resolve

    s = spec.removeprefix("hf:")
    if spec.startswith("builtin:") or s in BASES:
        return resolve(s)
    p = Path(s).expanduser()
    if not p.exists():
        raise PolicyError(f"base model path {str(p)!r} does not exist", where=str(p),
                          fix="use builtin:tiny, builtin:smollm2 or a folder written by "
                              "save_pretrained")
    if not (p / "config.json").is_file():
        raise PolicyError(f"{str(p)!r} is not a Hugging Face model folder (no config.json)",
                          where=str(p), fix="point at a folder written by save_pretrained")
    return p


def check_device(device: str) -> str:
    """``auto`` -> cuda when present else cpu; ``cuda`` without a GPU is a ConfigError."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} was asked for but no CUDA GPU is available",
                          where="device", fix="set device: cpu (or auto)")
    if device != "cpu" and not device.startswith("cuda"):
        raise ConfigError(f"unknown device {device!r}", where="device",
                          fix="use auto, cpu or cuda")
    return device


def load_base(path: Path, device: str = "cpu") -> tuple[Any, Any]:
    """(model, tokenizer) in fp32, eval mode, all base parameters frozen."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    except (OSError, ValueError, KeyError) as e:
        raise PolicyError(f"{str(path)!r} could not be loaded as a causal LM: "
                          f"{str(e).splitlines()[0][:200]}", where=str(path),
                          fix="point at a causal language model folder") from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(device).eval(), tok  # type: ignore[arg-type]


def attach_lora(model: Any, *, r: int = 16, alpha: int = 32, dropout: float = 0.0,
                seed: int = 0, targets: tuple[str, ...] = LORA_TARGETS) -> Any:
    """Wrap ``model`` in a fresh LoRA adapter on every linear layer that exists.
    The B matrices start at zero, so the adapted model starts equal to the base."""
    import torch
    from peft import LoraConfig, get_peft_model

    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    present = [t for t in targets if t in names]
    if not present:
        raise ConfigError("the base has none of the usual linear layer names for LoRA",
                          fix=f"expected some of {list(targets)}")
    torch.manual_seed(seed)
    cfg = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=present,
                     bias="none", task_type="CAUSAL_LM")
    return get_peft_model(model, cfg)
