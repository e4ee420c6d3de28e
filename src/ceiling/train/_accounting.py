"""The unit accounting of a training run: what post-training has consumed, in one place.

Every curve ceiling draws has real-cost axes (rollouts, distinct cards, environment steps,
tokens, trainer FLOPs, wall seconds, optimizer steps): :class:`~ceiling.train.Unit`, saved
in every checkpoint and every metrics line. :class:`Accounting` owns the running totals for
one run: it adds one optimizer step's :class:`~ceiling.train.StepResult` and keeps the
wall clock continuous across resumes (the saved ``wall_s`` plus the time since this process
resumed). FLOPs are the estimate documented on ``Unit``: 6·params per trained token, 2·params
per token through a forward pass only (sampling, reference, recomputation).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ._checkpoint import TrainerState, Unit
from ._optim import StepResult


@dataclass
class Accounting:
    """Running totals of one run, resumed from a :class:`TrainerState`."""

    unit: Unit
    params: int  # parameters of the base (the adapter adds little)
    cards_seen: set[str] = field(default_factory=set)
    wall0: float = 0.0  # wall seconds spent before this process resumed
    t_resume: float = field(default_factory=time.perf_counter)

    @classmethod
    def resume(cls, state: TrainerState, params: int) -> Accounting:
        return cls(state.unit, params, set(state.card_ids), state.unit.wall_s)

    def elapsed(self) -> float:
        """Seconds since this process started or resumed the run."""
        return time.perf_counter() - self.t_resume

    def add(self, res: StepResult) -> None:
        """Account one optimizer step."""
        u = self.unit
        gen_tok = 0
        for t in res.trajectories:
            self.cards_seen.add(t.card_id)
            u.env_steps += len(t.turns)
            u.generated_tokens += sum(len(x.token_ids) for x in t.turns)
            u.prompt_tokens += sum(len(x.prompt_token_ids) for x in t.turns)
            gen_tok += sum(len(x.token_ids) + len(x.prompt_token_ids) for x in t.turns)
        u.rollouts += len(res.trajectories)
        u.distinct_cards = len(self.cards_seen)
        u.trained_tokens += res.trained_tokens
        u.trainer_flops += 6.0 * self.params * res.trained_tokens + 2.0 * \
            self.params * (res.forward_tokens + gen_tok)
        u.optimizer_steps += int(res.metrics.get("updated", 0))
        u.wall_s = self.wall0 + self.elapsed()

    def card_ids(self) -> list[str]:
        return sorted(self.cards_seen)
