"""ceiling: raise a frozen base model's capability ceiling with RL from verifiable rewards.

The public door. Heavy parts (torch, transformers) load only when first used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> module that defines it (imported lazily so `import ceiling` stays fast)
_EXPORTS: dict[str, str] = {
    "CeilingError": "ceiling._errors",
    "CardError": "ceiling._errors",
    "ConfigError": "ceiling._errors",
    "SandboxError": "ceiling._errors",
    "SandboxUnavailable": "ceiling._errors",
    "PolicyError": "ceiling._errors",
    "TaskCard": "ceiling.cards",
    "FileEntry": "ceiling.cards",
    "load_card": "ceiling.cards",
    "save_card": "ceiling.cards",
    "open_sandbox": "ceiling.sandbox",
    "Sandbox": "ceiling.sandbox",
    "ExecResult": "ceiling.sandbox",
    "Limits": "ceiling.sandbox",
    "LayerStore": "ceiling.sandbox",
    "LocalSandboxWarning": "ceiling.sandbox",
    "namespaces_available": "ceiling.sandbox",
    "Action": "ceiling.tools",
    "TaskEnv": "ceiling.env",
    "make": "ceiling.envs",
    "templates": "ceiling.envs",
    "get_template": "ceiling.envs",
    "Template": "ceiling.envs",
    "register": "ceiling.envs",
    "TaskMix": "ceiling.envs",
    "Outcome": "ceiling.verify",
    "Verdict": "ceiling.verify",
    "RewardSpec": "ceiling.verify",
    "Verifier": "ceiling.verify",
    "Harness": "ceiling.harness",
    "HarnessConfig": "ceiling.harness",
    "render_line_episode": "ceiling.harness",
    "Policy": "ceiling.policies",
    "PolicyRequest": "ceiling.policies",
    "Generation": "ceiling.policies",
    "SamplingParams": "ceiling.policies",
    "load_policy": "ceiling.policies",
    "run_episodes": "ceiling.rollout",
    "Trajectory": "ceiling.rollout",
    "read_trajectories": "ceiling.rollout",
    "Store": "ceiling.evaluate",
    "RunRecord": "ceiling.evaluate",
    "summarize": "ceiling.evaluate",
    "pass_at_k": "ceiling.evaluate",
    "compare": "ceiling.evaluate",
    "gate": "ceiling.evaluate",
    "run_eval": "ceiling.evaluate",
    "render_report": "ceiling.evaluate",
    "Trainer": "ceiling.train",
    "TrainConfig": "ceiling.train",
    "load_config": "ceiling.train",
    "run_demo": "ceiling.train",
    "verify_base": "ceiling.train",
}

# sub-packages whose name a door export would shadow: ``ceiling.verify`` is always the
# package (its ``verify(card, sandbox)`` function is ``ceiling.verify.verify``); a function
# cached under the package's name broke ``import ceiling.verify`` for the whole process
_PACKAGES = ("verify",)

__all__ = sorted([*_EXPORTS, *_PACKAGES, "__version__"])  # noqa: PLE0605


def __getattr__(name: str) -> Any:
    if name in _PACKAGES:
        return importlib.import_module(f"ceiling.{name}")
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'ceiling' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
