"""Unit accounting of a run (ceiling.train._accounting.Accounting): every axis, resumes."""

from __future__ import annotations

from ceiling.rollout import Trajectory, Turn
from ceiling.train import StepResult, Unit
from ceiling.train._accounting import Accounting
from ceiling.train._checkpoint import TrainerState


def _traj(card: str, turns: list[tuple[int, int]]) -> Trajectory:
    return Trajectory(episode_id=card, card_id=card, card_hash="", template=None, type="t",
                      horizon="short", difficulty=1, split="train", feasible=True, faults=False,
                      seed=0, sample=0, policy="p", harness_fingerprint="", sampling={},
                      turns=[Turn(text="", token_ids=[1] * g, prompt_token_ids=[2] * p)
                             for g, p in turns])


def test_one_step_adds_every_axis() -> None:
    acct = Accounting.resume(TrainerState(), params=10)
    res = StepResult([_traj("a", [(3, 5), (2, 4)]), _traj("b", [(1, 1)])],
                     metrics={"updated": 1.0}, trained_tokens=6, forward_tokens=7)
    acct.add(res)
    u = acct.unit
    assert (u.rollouts, u.distinct_cards, u.env_steps) == (2, 2, 3)
    assert (u.generated_tokens, u.prompt_tokens, u.trained_tokens) == (6, 10, 6)
    assert u.trainer_flops == 6.0 * 10 * 6 + 2.0 * 10 * (7 + 16)
    assert u.optimizer_steps == 1 and u.wall_s >= 0.0
    assert acct.card_ids() == ["a", "b"]


def test_resume_keeps_the_cards_seen_and_the_wall_clock() -> None:
    state = TrainerState(unit=Unit(rollouts=4, distinct_cards=1, wall_s=100.0), card_ids=["a"])
    acct = Accounting.resume(state, params=1)
    acct.add(StepResult([_traj("a", [(1, 1)]), _traj("c", [])]))
    assert acct.unit is state.unit  # the state's unit is the one that is saved
    assert (acct.unit.rollouts, acct.unit.distinct_cards) == (6, 2)
    assert acct.unit.wall_s >= 100.0 and acct.card_ids() == ["a", "c"]
