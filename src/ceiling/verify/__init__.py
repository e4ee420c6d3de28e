"""The verifier: hidden tests, tamper detection, lint and milestones -> a Verdict."""

from ._verdict import Outcome, RewardSpec, TestResult, Verdict

__all__ = ["Outcome", "RewardSpec", "TestResult", "Verdict"]
