"""``load_policy(spec)``: one spec string selects a policy.

- ``scripted:oracle`` | ``scripted:null`` | ``scripted:random`` | ``scripted:exploit:NAME``
- ``hf:PATH`` or ``hf:PATH+ADAPTER`` (a local transformers folder, optional PEFT adapter)
- ``openai:MODEL@URL`` (any OpenAI-compatible endpoint, e.g. ``ceiling serve``)
- ``builtin:tiny`` | ``builtin:smollm2`` (resolved through ``ceiling.basemodel.resolve``),
  optionally ``builtin:tiny+ADAPTER``
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._errors import PolicyError, nearest
from ._types import Policy

KINDS = ("scripted", "hf", "openai", "builtin")


def _split_adapter(rest: str) -> tuple[str, str | None]:
    if "+" not in rest or Path(rest).expanduser().exists():
        return rest, None
    path, adapter = rest.rsplit("+", 1)
    return path, adapter or None


def resolve_builtin(name: str) -> Path:
    """The folder of a built-in base (``tiny``, ``smollm2``)."""
    from ..basemodel import resolve

    return Path(resolve(name))


def load_policy(spec: str, **kwargs: Any) -> Policy:
    """Build the policy a spec names. ``kwargs`` go to the backend (``device``, ``dtype``,
    ``timeout_s``, ``retries``, ``concurrency``, ...). Raises PolicyError for a bad spec, a
    missing path or an unknown scripted policy."""
    if not isinstance(spec, str) or ":" not in spec:
        raise PolicyError(f"policy spec {spec!r} has no kind",
                          fix="write KIND:ARG, e.g. scripted:oracle, hf:PATH, "
                              "openai:MODEL@URL, builtin:tiny")
    kind, rest = spec.split(":", 1)
    if kind == "scripted":
        from ._scripted import ScriptedPolicy, plan_factory

        return ScriptedPolicy(plan_factory(rest), spec)
    if kind == "hf":
        from ._hf import HFPolicy

        path, adapter = _split_adapter(rest)
        if not path:
            raise PolicyError("hf: needs a model folder", fix="write hf:PATH or hf:PATH+ADAPTER")
        return HFPolicy(path, adapter, spec=spec, **kwargs)
    if kind == "builtin":
        from ._hf import HFPolicy

        name, adapter = (rest.split("+", 1) + [None])[:2] if "+" in rest else (rest, None)
        return HFPolicy(resolve_builtin(str(name)), adapter, spec=spec, **kwargs)
    if kind == "openai":
        from ._openai import OpenAIPolicy

        at = max(rest.find("@http://"), rest.find("@https://"))
        if at <= 0:
            raise PolicyError(f"openai spec {spec!r} needs MODEL@URL",
                              fix="e.g. openai:tiny@http://127.0.0.1:8000/v1")
        return OpenAIPolicy(rest[:at], rest[at + 1:], spec=spec, **kwargs)
    hint = nearest(kind, KINDS)
    raise PolicyError(f"unknown policy kind {kind!r} in {spec!r}",
                      fix=f"did you mean '{hint}:'?" if hint else f"use one of {KINDS}")


def policy_tokenizer(policy: Any) -> Any:
    """The chat tokenizer a policy renders with (for the harness fingerprint), or None."""
    return getattr(policy, "tokenizer", None)


__all__ = ["KINDS", "load_policy", "policy_tokenizer", "resolve_builtin"]

