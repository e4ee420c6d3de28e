"""The optimizer seam: what the trainer asks of GRPO, ES or any other update rule.

The trainer owns the loop (stages, card sampling, accounting, checkpoints, metrics); an
:class:`Optimizer` owns one *step*: it asks ``ctx.rollout`` for the scored episodes it
needs (GRPO: ``group_size`` samples per card; ES: one batch per perturbation) and updates
the trainable (adapter) parameters. Everything it needs to resume exactly goes through
``state_dict`` / ``load_state_dict``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..cards import TaskCard
from ..rollout import Trajectory

# (cards, samples per card, seed) -> one list of trajectories per card, in card order
RolloutFn = Callable[[Sequence[TaskCard], int, int], list[list[Trajectory]]]


@dataclass
class StepContext:
    step: int
    cards: list[TaskCard]
    rollout: RolloutFn
    seed: int


@dataclass
class StepResult:
    """What one optimizer step did. ``trajectories`` are all episodes it ran (for the
    sampler and the accounting); ``trained_tokens`` the tokens that went through a
    forward+backward pass; ``forward_tokens`` those through a forward pass only (reference
    and recomputation)."""

    trajectories: list[Trajectory]
    metrics: dict[str, float] = field(default_factory=dict)
    trained_tokens: int = 0
    forward_tokens: int = 0


@runtime_checkable
class Optimizer(Protocol):
    name: str

    def step(self, ctx: StepContext) -> StepResult: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


OptimizerFactory = Callable[..., Optimizer]
_OPTIMIZERS: dict[str, OptimizerFactory] = {}


def register_optimizer(name: str, factory: OptimizerFactory) -> None:
    """Make ``optimizer: NAME`` selectable in a training config."""
    _OPTIMIZERS[name] = factory


def optimizer_factory(name: str) -> OptimizerFactory:
    if name == "grpo" and name not in _OPTIMIZERS:
        from . import _grpo  # noqa: F401 - registers itself
    if name == "es" and name not in _OPTIMIZERS:
        from . import _es  # noqa: F401 - registers itself
    if name not in _OPTIMIZERS:
        from .._errors import ConfigError

        raise ConfigError(f"unknown optimizer {name!r}",
                          fix=f"use one of {sorted(_OPTIMIZERS) or ['grpo']}")
    return _OPTIMIZERS[name]
