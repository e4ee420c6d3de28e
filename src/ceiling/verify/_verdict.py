"""What the verifier says about an episode: an explicit outcome, a reward and its parts."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Outcome(StrEnum):
    """How an episode ended, as the verifier judged it. A ``str`` enum: JSON and
    comparisons with the plain strings (``"infra_error"``) are unchanged, and ``str()`` is
    the value. ``truncated`` (budget ran out) is kept apart from ending by ``submit`` /
    ``give_up``, as in Gymnasium; ``infra_error`` never counts against the model."""

    SOLVED = "solved"
    FAILED = "failed"
    TRUNCATED = "truncated"  # the budget ran out before submit / give_up
    ABSTAINED_CORRECT = "abstained_correct"  # gave up on an infeasible card
    ABSTAINED_WRONG = "abstained_wrong"  # gave up on a feasible card
    HACK_DETECTED = "hack_detected"
    INFRA_ERROR = "infra_error"  # never counts against the model

    @property
    def passed(self) -> bool:
        """An episode *passes* when it is solved, or a correct abstention."""
        return self in (Outcome.SOLVED, Outcome.ABSTAINED_CORRECT)


class RewardSpec(BaseModel):
    """How components become one scalar reward.

    reward = outcome_weight * test_pass_rate + process_weight * sum(milestone rewards)
             - lint_penalty * lint_warnings;  tampering -> tamper_reward (default -1).

    Milestone rewards are paid only when at least one hidden test passes
    (``milestones_need_tests``), so state that merely looks like progress cannot earn on its
    own. ``suspicious_penalty`` is subtracted per suspicious command found in the trajectory
    (git-history mining, network fetches, hunting for hidden tests); 0 by default, because
    those commands are legitimate in some tasks. A submit on an infeasible card earns
    ``infeasible_submit_reward``.
    """

    model_config = ConfigDict(extra="forbid")

    outcome_weight: float = 1.0
    process_weight: float = 1.0
    lint_penalty: float = 0.05
    tamper_reward: float = -1.0
    abstain_correct_reward: float = 1.0
    abstain_wrong_reward: float = 0.0
    truncated_scale: float = 1.0  # multiply the test reward when the budget ran out
    pass_threshold: float = 1.0  # test pass rate needed for outcome "solved"
    milestones_need_tests: bool = True
    suspicious_penalty: float = 0.0
    infeasible_submit_reward: float = 0.0


class TestResult(BaseModel):
    """One hidden test's result, as the grader recorded it."""

    id: str
    status: str  # "passed" | "failed" | "error" | "skipped" | "missing"
    message: str = ""


class Verdict(BaseModel):
    """The verifier's judgement of one episode: the :class:`Outcome`, the scalar reward and
    its ``components`` (test pass rate, milestones, lint, penalties; see
    :class:`RewardSpec`), each hidden test's result, ``evidence`` (human-readable reasons:
    tampering found, tests missing...), which milestones were met, grading time, and
    ``detail`` (grading mode, phase timings, infra causes). Immutable in spirit: a cached
    verdict is replayed as is."""

    outcome: Outcome
    reward: float
    components: dict[str, float] = Field(default_factory=dict)
    tests: list[TestResult] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    milestones: dict[str, bool] = Field(default_factory=dict)
    duration_s: float = 0.0
    verifier_version: str = "1"
    detail: dict[str, Any] = Field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.outcome.passed
