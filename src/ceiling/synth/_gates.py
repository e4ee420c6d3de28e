"""The validation gates every synthesized card passes before it is written.

1. **Screen** (:func:`screen`): the candidate's untouched workspace is graded by the real
   verifier (the null plan, a real episode): at least one hidden test must fail (they
   become the fail-to-pass tests) and at least one must still pass (pass-to-pass).
2. **Validate** (:func:`validate_batch`): :func:`ceiling.check.validate` on a batch of
   cards: the oracle (the reverse patch) passes every hidden test, the null plan passes
   none of the card (the untouched workspace fails), the card is not flaky, no infra error,
   and the exploit corpus earns nothing (each card gets ``exploits`` plans, rotating
   through the corpus across the batch; ``ceiling redteam --family DIR`` runs all of them).
3. **Truncated oracle** (:func:`truncated_passes`): where the bug spans several places, an
   oracle that reverts only half of them must fail at least one test.

Each refusal has a reason (:data:`REASONS`), tallied in the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..cards import TaskCard

REASONS = ("no_fail_to_pass", "no_pass_to_pass", "infra_error", "duplicate", "oracle_fails",
           "null_passes", "flaky", "exploit_earns", "truncated_oracle_passes", "tamper",
           "timeout")


def screen(card: TaskCard, *, backend: str) -> tuple[str | None, list[str], list[str],
                                                      dict[str, str]]:
    """Grade the untouched workspace: (refusal or None, failing ids, passing ids,
    failure messages)."""
    from ..check import run_plan
    from ..verify import null_plan

    v, _ = run_plan(card, null_plan(), backend=backend)
    if v.outcome.value in ("infra_error", "hack_detected"):
        why = "infra_error" if v.outcome.value == "infra_error" else "tamper"
        return why, [], [], {"_evidence": "; ".join(v.evidence)[:300]}
    status = {t.id: t.status for t in v.tests}
    msgs = {t.id: t.message for t in v.tests}
    failing = [t for t in card.acceptance.tests if status.get(t) != "passed"]
    passing = [t for t in card.acceptance.tests if status.get(t) == "passed"]
    if any("timed out" in (msgs.get(t) or "").lower() for t in failing):
        return "timeout", failing, passing, msgs
    if not failing:
        return "no_fail_to_pass", failing, passing, msgs
    if not passing:
        return "no_pass_to_pass", failing, passing, msgs
    return None, failing, passing, msgs


def evidence(rep: dict[str, Any], card_id: str) -> str:
    """The first failure of ``card_id`` in a validate report, as one short line."""
    for f in rep.get("failures", []):
        if f.get("card") == card_id:
            return f"{f.get('plan')}: {f.get('outcome')} {f.get('reward')} " + "; ".join(
                f.get("evidence", [])[:2])[:240]
    for i in rep.get("infra_errors", []):
        if i.get("card") == card_id:
            return "infra: " + "; ".join(i.get("evidence", []))[:240]
    return ""


def validate_batch(cards: Sequence[TaskCard], *, backend: str, workers: int,
                   exploits: int, executor: str = "local", ray_address: str | None = None
                   ) -> tuple[dict[str, str | None], dict[str, Any]]:
    """Run :func:`ceiling.check.validate` on ``cards`` (on ``executor``); card id ->
    refusal or None."""
    from ..check import validate

    rep = validate(cards, backend=backend, repeats=1, exploits_per_card=exploits,
                   workers=workers, executor=executor, ray_address=ray_address)
    out: dict[str, str | None] = {c.id: None for c in cards}
    for i in rep["infra_errors"]:
        out[i["card"]] = "infra_error"
    for cid in rep["flaky"]:
        out[cid] = out[cid] or "flaky"
    for f in rep["failures"]:
        cid = f["card"]
        if out.get(cid):
            continue
        plan = f["plan"]
        out[cid] = ("oracle_fails" if plan == "oracle" else "null_passes" if plan == "null"
                    else "exploit_earns")
    return out, rep


def truncated_passes(card: TaskCard, partial_solution: str, *, backend: str) -> bool:
    """Whether an oracle that reverts only part of the bug still passes every test."""
    from ..check import run_plan
    from ..verify import oracle_plan

    half = card.model_copy(update={"solution": partial_solution})
    v, _ = run_plan(half, oracle_plan(), backend=backend)
    return bool(v.outcome.passed)
