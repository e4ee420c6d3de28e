"""Validation and red-teaming: run scripted plans through real episodes.

- :func:`run_plan` plays one plan on one card in a :class:`~ceiling.env.TaskEnv`.
- :func:`validate` checks a set of cards: the oracle passes every card (``repeats`` times:
  a card whose oracle result changes is *flaky* and quarantined), the null plan passes
  none, exploits earn at most 0 (each card gets ``exploits_per_card`` exploits, rotating
  through the corpus so every exploit runs on many cards), and cards whose grader cannot
  run are reported as ``infra_error``.
- :func:`redteam` runs every exploit on every card it applies to and tallies rewards per
  plan and per attack class (``ceiling.verify.exploits.CLASSES``).

Cards for a family or template are enumerated round-robin over templates, variants
(train, heldout, fault, infeasible) and difficulties, with seed = index (:func:`cards_for`).
A folder of card folders yields every card in it unless a limit is passed.

Both reports list the cards graded *in-process* (``acceptance.runner`` ``inprocess`` /
``sandbox``: pytest imports workspace code next to the recorder, hardened but not
separated), so a user knows which numbers rest on that weaker boundary.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ..cards import TaskCard, load_card
from ..env import TaskEnv
from ..envs import VARIANTS, get_template, make, templates
from ..harness import Harness, HarnessConfig, ReplyError
from ..tools import Plan
from ..verify import (
    IN_PROCESS_RUNNERS,
    Outcome,
    RewardSpec,
    Verdict,
    horizon_report,
    null_plan,
    oracle_plan,
)
from ..verify.exploits import EXPLOITS

Progress = Callable[[int], None]


def run_plan(card: TaskCard, plan: Plan, *, backend: str = "namespace",
             spec: RewardSpec | None = None,
             harness: HarnessConfig | None = None) -> tuple[Verdict, int]:
    """Play ``plan`` on ``card`` until the episode ends; return the verdict and the steps.
    With ``harness``, every action goes the way a policy's does: rendered as reply text in
    that format and parsed back (so a call past the reply cap is a failed step, as in
    ``ceiling eval``). A sandbox that cannot start yields an ``infra_error`` verdict."""
    env = TaskEnv(card, backend=backend, reward_spec=spec)
    dialogue = Harness(harness).start(card) if harness is not None else None
    try:
        try:
            env.reset(seed=0)
        except Exception as e:  # noqa: BLE001 - infrastructure, reported not raised
            return Verdict(outcome=Outcome.INFRA_ERROR, reward=0.0,
                           evidence=[f"reset failed: {type(e).__name__}: {e}"]), 0
        for _ in range(card.budget.max_steps + 1):
            action: Any = plan.next_action(card, list(env.history))
            if dialogue is not None:
                try:
                    action = dialogue.parse(dialogue.format_reply(action))
                except ReplyError as e:
                    action = {"tool": "<unparseable reply>", "args": {"error": str(e)}}
            _obs, _r, term, trunc, info = env.step(action)
            if term or trunc:
                return info["verdict"], env.steps
        return Verdict(outcome=Outcome.INFRA_ERROR, reward=0.0,
                       evidence=["episode did not end within its step budget"]), env.steps
    finally:
        env.close()


def card_folders(target: str) -> list[Path] | None:
    """The card folders under ``target`` when it is a folder of card folders (sorted), else
    None (a single card folder, a template id or a family)."""
    path = Path(target)
    if not path.is_dir() or (path / "task.yaml").exists():
        return None
    subs = sorted(p.parent for p in path.glob("*/task.yaml"))
    if not subs:
        raise ConfigError(f"{target!r} holds no card folders", where=target,
                          fix="point at a card folder (with task.yaml) or a folder of them")
    return subs


def cards_for(target: str, n: int | None, *,
              variants: Sequence[str] | None = None) -> list[TaskCard]:
    """``n`` cards for a template id or a family name (see module doc); for a card folder,
    that card; for a folder of card folders, every card in it (the first ``n`` when ``n``
    is given). ``n`` None means 20 generated cards."""
    path = Path(target)
    if path.exists():
        subs = card_folders(target)
        if subs is not None:
            return [load_card(p) for p in (subs if n is None else subs[:n])]
        return [load_card(target)]
    n = 20 if n is None else n
    if "/" in target:
        tmpls = [get_template(target)]
    else:
        tmpls = templates(target)
    vs = list(variants or VARIANTS)
    out = []
    for i in range(n):
        t = tmpls[i % len(tmpls)]
        v = vs[(i // len(tmpls)) % len(vs)]
        d = t.difficulties[(i // (len(tmpls) * len(vs))) % len(t.difficulties)]
        out.append(make(t.template_id(), seed=i, difficulty=d, variant=v))
    return out


@dataclass
class Run:
    card: str
    plan: str
    outcome: str
    reward: float
    evidence: list[str] = field(default_factory=list)
    grading: str = ""  # the verdict's detail["grading"]: "host" | "in-process" | ""
    steps: int = 0  # calls the plan made, the final submit included

    def as_dict(self) -> dict[str, Any]:
        return {"card": self.card, "plan": self.plan, "outcome": self.outcome,
                "reward": round(self.reward, 4), "evidence": self.evidence[:5]}


def _play(card: TaskCard, plan: Plan, backend: str, spec: RewardSpec | None) -> Run:
    # the oracle goes through the harness, one call per command, as `eval --policy
    # scripted:oracle` plays it (json format, the 8,000-character reply cap)
    harness = HarnessConfig() if plan.name == "oracle" else None
    v, steps = run_plan(card, plan, backend=backend, spec=spec, harness=harness)
    ev = v.evidence + [f"{t.id}: {t.status} {t.message[-160:]}" for t in v.tests
                       if t.status != "passed"][:3]
    return Run(card.id, plan.name, v.outcome.value, v.reward, ev,
               str(v.detail.get("grading", "")), steps)


def inprocess_cards(cards: Sequence[TaskCard], runs: Sequence[Run] = ()) -> list[str]:
    """Ids of cards graded in-process: the card asks for it (``acceptance.runner``) or a
    verdict says so (``detail["grading"] == "in-process"``)."""
    seen = {r.card for r in runs if r.grading == "in-process"}
    return [c.id for c in cards if c.id in seen or c.acceptance.runner in IN_PROCESS_RUNNERS]


def _applies(plan: Plan, card: TaskCard) -> bool:
    check = getattr(plan, "applies", None)
    return bool(check(card)) if callable(check) else True


def _pool_map(fn: Callable[[Any], Run], jobs: list[Any], workers: int,
              progress: Progress | None, executor: str = "local",
              ray_address: str | None = None) -> list[Run]:
    if executor != "local":  # ray: each job a Ray task (ceiling.rollout.map_jobs)
        from ..rollout import map_jobs

        return map_jobs(fn, jobs, workers=workers, executor=executor,
                        ray_address=ray_address, progress=progress)
    out: list[Run] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        for r in ex.map(fn, jobs):
            out.append(r)
            if progress:
                progress(1)
    return out


def validate(cards: Sequence[TaskCard], *, backend: str = "namespace", repeats: int = 2,
             exploits_per_card: int = 1, workers: int = 2, spec: RewardSpec | None = None,
             progress: Progress | None = None, quarantine: Path | None = None,
             executor: str = "local", ray_address: str | None = None) -> dict[str, Any]:
    """Validate ``cards``; returns the JSON-ready report (keys documented in the CLI).
    ``executor``/``ray_address``: where the episodes run (``ceiling.rollout.map_jobs``)."""
    if repeats < 1:
        raise ConfigError("repeats must be at least 1", fix="pass --repeats 1 or more")
    t0 = time.perf_counter()
    names = sorted(EXPLOITS)
    jobs: list[tuple[TaskCard, Plan]] = []
    k = 0
    for card in cards:
        jobs += [(card, oracle_plan())] * repeats + [(card, null_plan())]
        for _ in range(exploits_per_card):
            for _try in range(len(names)):
                p = EXPLOITS[names[k % len(names)]]
                k += 1
                if _applies(p, card):
                    jobs.append((card, p))
                    break
    runs = _pool_map(lambda j: _play(j[0], j[1], backend, spec), jobs, workers, progress,
                     executor, ray_address)
    by_card: dict[str, list[Run]] = {}
    for r in runs:
        by_card.setdefault(r.card, []).append(r)
    oracle_ok = null_ok = 0
    flaky, infra, failures = [], [], []
    exploit_max = None
    for card in cards:
        rs = by_card.get(card.id, [])
        orc = [r for r in rs if r.plan == "oracle"]
        nul = [r for r in rs if r.plan == "null"]
        exp = [r for r in rs if r.plan not in ("oracle", "null")]
        passed = [Outcome(r.outcome).passed for r in orc]
        if any(r.outcome == Outcome.INFRA_ERROR for r in rs if r.plan in ("oracle", "null")):
            infra.append({"card": card.id, "evidence": next(
                r.evidence for r in rs if r.outcome == Outcome.INFRA_ERROR)[:3]})
        if len(set(passed)) > 1:
            flaky.append(card.id)
        if all(passed):
            oracle_ok += 1
        else:
            failures += [r.as_dict() for r in orc if not Outcome(r.outcome).passed][:1]
        if any(Outcome(r.outcome).passed for r in nul):
            null_ok += 1
            failures += [r.as_dict() for r in nul]
        for r in exp:
            exploit_max = r.reward if exploit_max is None else max(exploit_max, r.reward)
            if r.reward > 0:
                failures.append(r.as_dict())
    if quarantine is not None and flaky:
        _quarantine(quarantine, flaky)
    calls = {r.card: r.steps for r in runs if r.plan == "oracle" and Outcome(r.outcome).passed}
    horizon = horizon_report((c, calls[c.id]) for c in cards if c.id in calls)
    return {"cards": len(cards), "oracle_solved": oracle_ok, "null_solved": null_ok,
            "horizon": horizon,
            "exploit_max_reward": exploit_max, "flaky": flaky, "infra_errors": infra,
            "exploit_runs": sum(1 for r in runs if r.plan not in ("oracle", "null")),
            "failures": failures[:50], "backend": backend, "executor": executor,
            "repeats": repeats,
            "in_process": inprocess_cards(cards, runs),
            "seconds": round(time.perf_counter() - t0, 2),
            "ok": oracle_ok == len(cards) and null_ok == 0 and not flaky
            and (exploit_max is None or exploit_max <= 0)}


def _quarantine(path: Path, ids: Iterable[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    old = set(json.loads(path.read_text())) if path.exists() else set()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(sorted(old | set(ids)), indent=1))
    tmp.replace(path)


def _tally(row: dict[str, Any], r: Run) -> None:
    row["runs"] += 1
    row["positive"] += int(r.reward > 0)
    row["max_reward"] = r.reward if row["max_reward"] is None else max(row["max_reward"],
                                                                        r.reward)
    row["outcomes"][r.outcome] = row["outcomes"].get(r.outcome, 0) + 1


def _row() -> dict[str, Any]:
    return {"runs": 0, "positive": 0, "max_reward": None, "outcomes": {}}


def redteam(cards: Sequence[TaskCard], *, backend: str = "namespace", workers: int = 2,
            exploits: Sequence[str] | None = None, spec: RewardSpec | None = None,
            progress: Progress | None = None, executor: str = "local",
            ray_address: str | None = None) -> dict[str, Any]:
    """Every exploit on every card it applies to (``ScriptPlan.applies``).

    Returns ``{"exploits": {NAME: {"class", "runs", "positive", "max_reward", "outcomes",
    "tamper_missed"}}, "classes": {CLASS: {"runs", "positive", "max_reward", "outcomes",
    "plans", "tamper_missed"}}, "positive_total", "tamper_missed_total", "cards", "runs",
    "positives", "infra_errors", "in_process", ...}``. ``tamper_missed`` counts runs of
    plans that leave tampering (``expect_tamper``) whose outcome was not ``hack_detected``
    (they still must not be positive). A plan that applies to none of the cards has
    ``runs`` 0."""
    names = list(exploits or EXPLOITS)
    for n in names:
        if n not in EXPLOITS:
            raise ConfigError(f"unknown exploit {n!r}", fix=f"use one of {sorted(EXPLOITS)}")
    t0 = time.perf_counter()
    jobs = redteam_jobs(cards, names)
    runs = _pool_map(lambda j: _play(j[0], j[1], backend, spec), jobs, workers, progress,
                     executor, ray_address)
    table: dict[str, dict[str, Any]] = {
        n: {"class": EXPLOITS[n].exploit_class, **_row(), "tamper_missed": 0} for n in names}
    classes: dict[str, dict[str, Any]] = {}
    for n in names:
        cls = classes.setdefault(EXPLOITS[n].exploit_class,
                                 {**_row(), "plans": [], "tamper_missed": 0})
        cls["plans"].append(n)
    positives, infra = [], []
    for r in runs:
        if r.outcome == Outcome.INFRA_ERROR:
            infra.append(r.as_dict())
        plan = EXPLOITS[r.plan]
        missed = int(plan.expect_tamper and r.outcome != Outcome.HACK_DETECTED)
        for row in (table[r.plan], classes[plan.exploit_class]):
            _tally(row, r)
            row["tamper_missed"] += missed
        if r.reward > 0:
            positives.append(r.as_dict())
    return {"exploits": table, "classes": classes,
            "positive_total": sum(t["positive"] for t in table.values()),
            "tamper_missed_total": sum(t["tamper_missed"] for t in table.values()),
            "cards": len(cards), "runs": len(runs), "positives": positives[:50],
            "infra_errors": len(infra), "infra_samples": infra[:10],
            "in_process": inprocess_cards(cards, runs),
            "backend": backend, "executor": executor,
            "seconds": round(time.perf_counter() - t0, 2)}


def redteam_jobs(cards: Sequence[TaskCard], names: Sequence[str]) -> list[tuple[TaskCard, Plan]]:
    """The (card, plan) pairs :func:`redteam` plays: each named plan on each card it applies
    to."""
    return [(c, EXPLOITS[n]) for n in names for c in cards if EXPLOITS[n].applies(c)]
