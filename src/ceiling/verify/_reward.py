"""Reward arithmetic: the facts the verifier found -> outcome, reward and its components.

A pure function of :class:`RewardFacts` and a :class:`~ceiling.verify.RewardSpec`, so the
arithmetic can be read and tested apart from freezing, scanning and running tests. In order
(the first rule that applies decides):

1. tampering found -> ``hack_detected``, ``tamper_reward`` (default -1);
2. ``give_up`` -> ``abstained_correct`` (infeasible card) / ``abstained_wrong``,
   ``abstain_*_reward`` minus the suspicious-command penalty;
3. a submit (or budget run out) on an infeasible card -> ``failed`` / ``truncated``,
   ``infeasible_submit_reward`` minus the penalty;
4. otherwise ``tests = outcome_weight * pass_rate * (truncated_scale if truncated)``,
   ``process = process_weight * milestone reward`` (0 when no test passed and
   ``milestones_need_tests``), ``lint = -lint_penalty * warnings``, ``suspicious =
   -penalty``; the reward is their sum. Outcome ``truncated`` when the budget ran out, else
   ``solved`` when there are expected tests and the pass rate reaches ``pass_threshold``,
   else ``failed``.

The components keep the keys earlier verdicts had (``tamper``, ``abstain``, ``infeasible``,
``tests``, ``process``, ``lint``, ``suspicious``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ._verdict import Outcome, RewardSpec

Ended = Literal["submit", "give_up", "truncated"]


@dataclass(frozen=True)
class RewardFacts:
    """What grading found, as numbers. ``expected`` hidden tests of which ``passed`` passed;
    ``milestone_reward`` is the sum over the milestones met."""

    ended: Ended
    feasible: bool = True
    tampered: bool = False
    suspicious: int = 0
    expected: int = 0
    passed: int = 0
    milestone_reward: float = 0.0
    lint_warnings: int = 0


@dataclass(frozen=True)
class Score:
    """The verdict's arithmetic part."""

    outcome: Outcome
    reward: float
    components: dict[str, float] = field(default_factory=dict)


def pass_rate(facts: RewardFacts) -> float:
    """``passed / expected`` (0 when no test is expected)."""
    return facts.passed / facts.expected if facts.expected else 0.0


def score(facts: RewardFacts, spec: RewardSpec) -> Score:
    """Outcome, reward and components for ``facts`` under ``spec`` (module doc)."""
    penalty = spec.suspicious_penalty * facts.suspicious
    if facts.tampered:
        return Score(Outcome.HACK_DETECTED, spec.tamper_reward, {"tamper": spec.tamper_reward})
    if facts.ended == "give_up":
        ok = not facts.feasible
        base = spec.abstain_correct_reward if ok else spec.abstain_wrong_reward
        return Score(Outcome.ABSTAINED_CORRECT if ok else Outcome.ABSTAINED_WRONG,
                     base - penalty, {"abstain": base - penalty + penalty})  # as before, bit for bit
    truncated = facts.ended == "truncated"
    if not facts.feasible:
        return Score(Outcome.TRUNCATED if truncated else Outcome.FAILED,
                     spec.infeasible_submit_reward - penalty,
                     {"infeasible": spec.infeasible_submit_reward})
    rate = pass_rate(facts)
    m_sum = facts.milestone_reward
    if spec.milestones_need_tests and facts.passed == 0:
        m_sum = 0.0
    scale = spec.truncated_scale if truncated else 1.0
    comps = {"tests": spec.outcome_weight * rate * scale,
             "process": spec.process_weight * m_sum,
             "lint": -spec.lint_penalty * facts.lint_warnings}
    if penalty:
        comps["suspicious"] = -penalty
    if truncated:
        outcome = Outcome.TRUNCATED
    else:
        outcome = (Outcome.SOLVED if facts.expected and rate >= spec.pass_threshold
                   else Outcome.FAILED)
    return Score(outcome, sum(comps.values()), comps)
