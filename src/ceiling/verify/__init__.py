"""The verifier: hidden tests, tamper detection, lint and milestones -> a Verdict.

Also the scripted plans (oracle, null, random) used by validation and the ``scripted:*``
policies; the exploit corpus lives in :mod:`ceiling.verify.exploits`.
"""

from ._plans import Plan, ScriptPlan, null_plan, oracle_plan, random_plan
from ._verdict import Outcome, RewardSpec, TestResult, Verdict
from ._verifier import Verifier, verify

__all__ = ["Outcome", "Plan", "RewardSpec", "ScriptPlan", "TestResult", "Verdict", "Verifier",
           "null_plan", "oracle_plan", "random_plan", "verify"]
