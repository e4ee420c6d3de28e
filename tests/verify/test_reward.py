"""The reward arithmetic (ceiling.verify.score), apart from grading: each rule and its edges."""

from __future__ import annotations

import pytest

from ceiling.verify import Outcome, RewardFacts, RewardSpec, score

SPEC = RewardSpec()


def test_tampering_wins_over_everything() -> None:
    s = score(RewardFacts(ended="give_up", feasible=False, tampered=True, passed=3,
                          expected=3), SPEC)
    assert (s.outcome, s.reward, s.components) == (Outcome.HACK_DETECTED, -1.0, {"tamper": -1.0})


@pytest.mark.parametrize(("feasible", "outcome", "reward"), [
    (False, Outcome.ABSTAINED_CORRECT, 1.0), (True, Outcome.ABSTAINED_WRONG, 0.0)])
def test_give_up_is_an_abstention(feasible: bool, outcome: Outcome, reward: float) -> None:
    s = score(RewardFacts(ended="give_up", feasible=feasible), SPEC)
    assert (s.outcome, s.reward, s.components) == (outcome, reward, {"abstain": reward})


def test_suspicious_commands_cost_the_penalty_each() -> None:
    spec = RewardSpec(suspicious_penalty=0.25)
    s = score(RewardFacts(ended="give_up", feasible=False, suspicious=2), spec)
    assert s.reward == pytest.approx(0.5) and s.components == {"abstain": 1.0}
    s = score(RewardFacts(ended="submit", expected=2, passed=2, suspicious=1), spec)
    assert s.components["suspicious"] == -0.25 and s.reward == pytest.approx(0.75)
    assert s.outcome is Outcome.SOLVED  # the penalty lowers the reward, not the outcome


@pytest.mark.parametrize(("ended", "outcome"), [("submit", Outcome.FAILED),
                                                ("truncated", Outcome.TRUNCATED)])
def test_submit_on_an_infeasible_card(ended: str, outcome: Outcome) -> None:
    spec = RewardSpec(infeasible_submit_reward=-0.5)
    s = score(RewardFacts(ended=ended, feasible=False, expected=1, passed=1), spec)  # type: ignore[arg-type]
    assert (s.outcome, s.reward, s.components) == (outcome, -0.5, {"infeasible": -0.5})


def test_pass_rate_threshold_decides_solved() -> None:
    spec = RewardSpec(pass_threshold=0.5)
    half = score(RewardFacts(ended="submit", expected=4, passed=2), spec)
    assert (half.outcome, half.reward) == (Outcome.SOLVED, 0.5)
    assert score(RewardFacts(ended="submit", expected=4, passed=1), spec).outcome is Outcome.FAILED
    none = score(RewardFacts(ended="submit", expected=0, passed=0), spec)
    assert (none.outcome, none.reward) == (Outcome.FAILED, 0.0)  # no tests is never solved


def test_truncated_scales_the_test_reward_and_stays_truncated() -> None:
    s = score(RewardFacts(ended="truncated", expected=2, passed=2),
              RewardSpec(truncated_scale=0.5))
    assert (s.outcome, s.components["tests"], s.reward) == (Outcome.TRUNCATED, 0.5, 0.5)


def test_milestones_pay_only_when_a_test_passes() -> None:
    facts = {"ended": "submit", "expected": 2, "milestone_reward": 0.3}
    assert score(RewardFacts(**facts, passed=0), SPEC).components["process"] == 0.0  # type: ignore[arg-type]
    assert score(RewardFacts(**facts, passed=1), SPEC).components["process"] == 0.3  # type: ignore[arg-type]
    free = RewardSpec(milestones_need_tests=False, process_weight=2.0)
    assert score(RewardFacts(**facts, passed=0), free).reward == pytest.approx(0.6)  # type: ignore[arg-type]


def test_components_sum_to_the_reward() -> None:
    spec = RewardSpec(outcome_weight=2.0, lint_penalty=0.1, suspicious_penalty=0.2)
    s = score(RewardFacts(ended="submit", expected=3, passed=2, milestone_reward=0.5,
                          lint_warnings=3, suspicious=1), spec)
    assert set(s.components) == {"tests", "process", "lint", "suspicious"}
    assert s.reward == pytest.approx(sum(s.components.values()))
    assert s.components["lint"] == pytest.approx(-0.3)
    assert s.reward == pytest.approx(2 * 2 / 3 + 0.5 - 0.3 - 0.2)
