"""The verifier: hidden tests, tamper detection, lint and milestones -> a Verdict.

Also the scripted plans (oracle, null, random) used by validation and the ``scripted:*``
policies; the exploit corpus lives in :mod:`ceiling.verify.exploits`.
"""

from ._grader import grade_in_sandbox
from ._oracle import horizon_report, oracle_call_count
from ._plans import Plan, ScriptPlan, null_plan, oracle_plan, random_plan
from ._reward import RewardFacts, Score, score
from ._verdict import Outcome, RewardSpec, TestResult, Verdict
from ._verifier import Ended, Verifier, verify

#: Runners whose hidden tests import workspace code in the test process (hardened, not
#: sealed): reports list their cards as "in-process".
IN_PROCESS_RUNNERS = ("inprocess", "sandbox")


def grading_mode(card: object) -> str:
    """``"in-process"`` or ``"host"``: how ``card`` is graded (also in every verdict as
    ``Verdict.detail["grading"]``)."""
    runner = getattr(getattr(card, "acceptance", None), "runner", "subject")
    return "in-process" if runner in IN_PROCESS_RUNNERS else "host"


__all__ = [
    "IN_PROCESS_RUNNERS",
    "Ended",
    "Outcome",
    "Plan",
    "RewardFacts",
    "RewardSpec",
    "Score",
    "ScriptPlan",
    "TestResult",
    "Verdict",
    "Verifier",
    "grade_in_sandbox",
    "grading_mode",
    "horizon_report",
    "null_plan",
    "oracle_call_count",
    "oracle_plan",
    "random_plan",
    "score",
    "verify"
]
