"""Difficulty filtering, part 2: a card sampler that stays in the productive pass-rate band.

GRPO learns only from groups with reward variance, i.e. from cards the policy sometimes
solves and sometimes not. The sampler keeps an online estimate of the pass rate per
(template, difficulty) — an exponentially decayed Beta(1, 1) posterior mean — and draws
the next cards' (template, difficulty) with weight 1 inside ``[low, high]`` and weight
``explore`` outside it (so an arm that left the band is still revisited and can return).

An arm is a (template, difficulty, variant) to generate cards from, or one fixed card of a
stage's card folder (``path``; its pass rate is that card's). Card seeds come from the
sampler's own stream, starting at ``seed_base``; evaluation
suites use seeds far away (see :data:`EVAL_SEED_BASE`), so training never sees an
evaluation card. The whole state (estimates, RNG, next seed) is in ``state_dict``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..cards import TaskCard
from ..rollout import Trajectory
from ..verify import Outcome

EVAL_SEED_BASE = 1_000_000_000  # held-out evaluation seeds start here; training stays below
TRAIN_SEED_BASE = 0
CARD_CACHE = 32  # folder cards kept loaded between draws


@dataclass
class Arm:
    template: str
    difficulty: int
    variant: str = "train"
    passes: float = 0.0
    fails: float = 0.0
    seen: int = 0
    path: str | None = None  # a card folder: this arm is that one card (template = its id)

    @property
    def key(self) -> str:
        return f"{self.template}|d{self.difficulty}|{self.variant}"

    @property
    def rate(self) -> float:
        return (self.passes + 1.0) / (self.passes + self.fails + 2.0)


@dataclass
class BandSampler:
    """Draws cards for the next step from ``arms``; ``update`` feeds results back."""

    arms: list[Arm]
    low: float = 0.1
    high: float = 0.9
    explore: float = 0.1
    decay: float = 0.9
    seed: int = 0
    seed_base: int = TRAIN_SEED_BASE
    next_seed: int = 0
    rng: random.Random = field(default_factory=random.Random)
    _loaded: dict[str, TaskCard] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.arms:
            raise ValueError("the sampler needs at least one (template, difficulty) arm")
        self.rng = random.Random(f"band-sampler|{self.seed}")

    def _card(self, arm: Arm) -> TaskCard:
        """A folder arm's card, from a small cache of recently drawn cards (a synthesized
        card carries its project as a base layer: caching a whole folder would hold every
        copy in memory)."""
        from ..cards import load_card

        assert arm.path is not None
        card = self._loaded.pop(arm.path, None) or load_card(arm.path)
        self._loaded[arm.path] = card  # most recent last
        while len(self._loaded) > CARD_CACHE:
            self._loaded.pop(next(iter(self._loaded)))
        return card

    def weight(self, arm: Arm) -> float:
        return 1.0 if self.low <= arm.rate <= self.high else self.explore

    def draw(self, n: int) -> list[TaskCard]:
        from ..envs import make

        ws = [self.weight(a) for a in self.arms]
        out = []
        for _ in range(n):
            arm = self.rng.choices(self.arms, weights=ws, k=1)[0]
            if arm.path is not None:  # a fixed card: no seed to draw
                out.append(self._card(arm))
                continue
            seed = self.seed_base + self.next_seed
            if seed >= EVAL_SEED_BASE:
                raise RuntimeError("training card seeds ran into the evaluation seed range")
            self.next_seed += 1
            out.append(make(arm.template, seed=seed, difficulty=arm.difficulty,
                            variant=arm.variant))
        return out

    def update(self, trajectories: Sequence[Trajectory]) -> None:
        by_arm: dict[str, list[bool]] = {}
        fixed = {a.template: a.key for a in self.arms if a.path is not None}
        for t in trajectories:
            if t.outcome == Outcome.INFRA_ERROR:
                continue
            if t.card_id in fixed:  # a folder card is its own arm
                by_arm.setdefault(fixed[t.card_id], []).append(t.passed)
                continue
            if t.template is None:
                continue
            variant = t.card_id.rsplit("-", 1)[-1] if "@" in t.card_id else "train"
            by_arm.setdefault(f"{t.template}|d{t.difficulty}|{variant}", []).append(t.passed)
        for arm in self.arms:
            res = by_arm.get(arm.key)
            if not res:
                continue
            arm.passes = arm.passes * self.decay + sum(res)
            arm.fails = arm.fails * self.decay + (len(res) - sum(res))
            arm.seen += len(res)

    def in_band(self) -> float:
        return sum(self.low <= a.rate <= self.high for a in self.arms) / len(self.arms)

    def rates(self) -> dict[str, float]:
        return {a.key: round(a.rate, 3) for a in self.arms}

    def state_dict(self) -> dict[str, Any]:
        return {"arms": [vars(a).copy() for a in self.arms], "next_seed": self.next_seed,
                "rng": self.rng.getstate()}

    def load_state_dict(self, st: dict[str, Any]) -> None:
        self.arms = [Arm(**a) for a in st["arms"]]
        self.next_seed = int(st["next_seed"])
        state = st["rng"]
        self.rng.setstate((state[0], tuple(state[1]), state[2]))
