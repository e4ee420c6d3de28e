"""Stage reward reliability, and a warning when stages are ordered against it.

A stage's reward is only as good as its verifier on that stage's cards. ``stage_reliability``
measures it on a small sample, per template of the stage's mix, with the same runners as
``ceiling envs validate`` / ``ceiling redteam`` (:func:`ceiling.check.run_plan` in
real sandboxed episodes, under the stage's own reward spec):

    reliability = oracle solve rate x null fail rate x share of exploit runs earning <= 0

pooled over the sampled cards of every template (a stage's card folder, ``cards:``, is one
row whose cards are spread evenly over the folder). Per template it plays
``cards_per_template`` cards (seeds from :data:`RELIABILITY_SEED_BASE`, between the training
and the evaluation seed ranges; the stage's difficulties and variants in rotation): the
oracle once, the null plan once and ``exploits_per_card`` exploits, rotating through the
corpus (offset per template, so a mix covers many exploits). An oracle or null run that
ends in ``infra_error`` counts as unreliable (the reward could not be computed) and is
reported. With the defaults a template costs 1 + 1 + 3 = 5 episodes.

Results are cached per template and settings in ``$CEILING_HOME/cache/reliability/``
(never a result with infrastructure errors), so a config whose stages share templates, or a
second run, pays once. Limits: a small sample bounds the rates loosely — it catches broken
oracles, null-passable cards and exploitable reward specs, not rare flakes; ``ceiling envs
validate`` with many cards is the thorough check.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._home import ceiling_home
from ..cards import TaskCard
from ._config import StageConfig

RELIABILITY_SEED_BASE = 500_000_000  # training seeds stay below, evaluation starts at 1e9
_CACHE_FORMAT = 1


@dataclass
class TemplateReliability:
    template: str
    cards: int = 0
    oracle_solved: int = 0
    null_solved: int = 0
    exploit_runs: int = 0
    exploit_positive: int = 0
    infra_errors: int = 0
    exploits: list[str] = field(default_factory=list)
    positives: list[str] = field(default_factory=list)  # "exploit on card: reward"

    @property
    def reliability(self) -> float:
        return _score(self.cards, self.oracle_solved, self.null_solved, self.exploit_runs,
                      self.exploit_positive)


@dataclass
class StageReliability:
    stage: str
    reliability: float
    templates: list[TemplateReliability]
    episodes: int
    cached: int  # templates answered from the cache
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for t, row in zip(self.templates, d["templates"], strict=True):
            row["reliability"] = round(t.reliability, 4)
        return d


def _score(cards: int, oracle: int, null: int, runs: int, positive: int) -> float:
    if cards == 0:
        return 0.0
    return (oracle / cards) * (1.0 - null / cards) * ((runs - positive) / runs if runs else 1.0)


def _cache_dir() -> Path:
    return ceiling_home() / "cache" / "reliability"


FOLDER = "cards:"  # the row of a stage's card folder: its cards are fixed, not generated


def _arms_by_template(stage: StageConfig) -> dict[str, list[tuple[Any, ...]]]:
    """Template -> its (difficulty, variant) arms; a card folder's cards form one row
    ``cards:FOLDER`` of (difficulty, variant, card path) entries."""
    from ._cards import stage_arms

    out: dict[str, list[tuple[Any, ...]]] = {}
    for a in stage_arms(stage):  # raises ConfigError for an empty mix
        if a.path is not None:
            out.setdefault(f"{FOLDER}{stage.cards}", []).append(
                (a.difficulty, a.variant, a.path))
        else:
            out.setdefault(a.template, []).append((a.difficulty, a.variant))
    return out


def _cards(template: str, arms: list[tuple[Any, ...]], n: int) -> list[TaskCard]:
    if template.startswith(FOLDER):  # n cards spread evenly over the folder's sorted cards
        from ..cards import load_card

        picked = sorted(arms, key=lambda a: a[2])
        step = max(1, len(picked) // n)
        return [load_card(a[2]) for a in picked[::step][:n]]
    from ..envs import make

    return [make(template, seed=RELIABILITY_SEED_BASE + i, difficulty=arms[i % len(arms)][0],
                 variant=arms[i % len(arms)][1]) for i in range(n)]


def _measure_template(template: str, arms: list[tuple[Any, ...]], stage: StageConfig, *,
                      cards_per_template: int, exploits_per_card: int, exploit_names: list[str],
                      offset: int, backend: str, workers: int, executor: str = "local",
                      ray_address: str | None = None) -> tuple[TemplateReliability, int]:
    from ..check import run_plan
    from ..rollout import map_jobs
    from ..verify import null_plan, oracle_plan
    from ..verify.exploits import EXPLOITS

    cards = _cards(template, arms, cards_per_template)
    jobs: list[tuple[TaskCard, Any, str]] = []
    k = offset
    for card in cards:
        jobs += [(card, oracle_plan(), "oracle"), (card, null_plan(), "null")]
        picked = 0
        for _try in range(len(exploit_names)):
            if picked >= exploits_per_card:
                break
            p = EXPLOITS[exploit_names[k % len(exploit_names)]]
            k += 1
            if card.feasible or not p.feasible_only:
                jobs.append((card, p, "exploit"))
                picked += 1

    spec = stage.reward

    def play(j: tuple[TaskCard, Any, str]) -> tuple[str, str, str, str, float]:
        v, _ = run_plan(j[0], j[1], backend=backend, spec=spec)
        return j[0].id, j[1].name, j[2], v.outcome.value, float(v.reward)

    results = map_jobs(play, jobs, workers=workers, executor=executor, ray_address=ray_address)
    from ..verify import Outcome

    r = TemplateReliability(template, cards=len(cards))
    for card_id, name, role, outcome, reward in results:
        if role == "oracle":
            r.oracle_solved += int(Outcome(outcome).passed)
            r.infra_errors += int(outcome == Outcome.INFRA_ERROR)
        elif role == "null":
            r.null_solved += int(Outcome(outcome).passed)
            r.infra_errors += int(outcome == Outcome.INFRA_ERROR)
        else:
            r.exploit_runs += 1
            if name not in r.exploits:
                r.exploits.append(name)
            if reward > 0:
                r.exploit_positive += 1
                r.positives.append(f"{name} on {card_id}: {reward:.3g}")
    return r, len(jobs)


def stage_reliability(stage: StageConfig, *, cards_per_template: int = 1,
                      exploits_per_card: int = 3, exploits: Sequence[str] | None = None,
                      backend: str = "namespace", workers: int = 2,
                      cache: bool = True, executor: str = "local",
                      ray_address: str | None = None) -> StageReliability:
    """Measure ``stage``'s reward reliability (see the module doc) with a per-template
    breakdown. ``exploits`` restricts the corpus (default: all of it). ``executor`` /
    ``ray_address``: where the episodes run (``ceiling.rollout.map_jobs``); the result and
    its cache do not depend on them."""
    from .._errors import ConfigError
    from ..verify.exploits import EXPLOITS

    names = sorted(exploits) if exploits is not None else sorted(EXPLOITS)
    for n in names:
        if n not in EXPLOITS:
            raise ConfigError(f"unknown exploit {n!r}", fix=f"use some of {sorted(EXPLOITS)}")
    if cards_per_template < 1:
        raise ConfigError("cards_per_template must be at least 1", fix="pass 1 or more")
    t0 = time.perf_counter()
    by_t = _arms_by_template(stage)
    rows: list[TemplateReliability] = []
    episodes = cached = 0
    for i, (template, arms) in enumerate(sorted(by_t.items())):
        fixed = ([c.content_id() for c in _cards(template, arms, cards_per_template)]
                 if template.startswith(FOLDER) else None)  # a folder's cards may change
        key = hashlib.sha256(json.dumps({
            "f": _CACHE_FORMAT, "t": template, "arms": sorted(arms), "n": cards_per_template,
            "cards": fixed,
            "e": exploits_per_card, "names": names, "off": i, "backend": backend,
            "reward": stage.reward.model_dump(mode="json")}, sort_keys=True).encode()
        ).hexdigest()[:24]
        f = _cache_dir() / f"{template.replace('/', '__')[-100:]}-{key}.json"
        if cache and f.is_file():
            try:
                rows.append(TemplateReliability(**json.loads(f.read_text())))
                cached += 1
                continue
            except (ValueError, TypeError):
                pass  # an unreadable cache entry is measured again
        row, played = _measure_template(template, arms, stage, cards_per_template=cards_per_template,
                                   exploits_per_card=exploits_per_card, exploit_names=names,
                                   offset=i * exploits_per_card * cards_per_template,
                                   backend=backend, workers=workers,
                                   executor=executor, ray_address=ray_address)
        episodes += played
        rows.append(row)
        if cache and row.infra_errors == 0:
            f.parent.mkdir(parents=True, exist_ok=True)
            tmp = f.with_name(f".{f.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(asdict(row), sort_keys=True))
            tmp.replace(f)
    rel = _score(sum(r.cards for r in rows), sum(r.oracle_solved for r in rows),
                 sum(r.null_solved for r in rows), sum(r.exploit_runs for r in rows),
                 sum(r.exploit_positive for r in rows))
    return StageReliability(stage.name, rel, rows, episodes, cached,
                            round(time.perf_counter() - t0, 2))


def measure_reliability(stage: StageConfig, **kw: Any) -> float:
    """The stage's reward reliability in [0, 1] (see :func:`stage_reliability`)."""
    return stage_reliability(stage, **kw).reliability


def check_stage_order(stages: Sequence[StageConfig],
                      reliabilities: Sequence[float] | None = None, *,
                      tolerance: float = 0.0, **kw: Any) -> list[str]:
    """Warnings for every pair where a less reliable stage comes before a more reliable one
    (by more than ``tolerance``). ``reliabilities`` (one per stage) skips the measuring;
    otherwise each stage is measured with :func:`measure_reliability` (``kw`` passed on)."""
    rel = list(reliabilities) if reliabilities is not None else [
        measure_reliability(s, **kw) for s in stages]
    if len(rel) != len(stages):
        raise ValueError("one reliability per stage is needed")
    out = []
    for i, a in enumerate(stages):
        for j in range(i + 1, len(stages)):
            b = stages[j]
            if rel[i] + tolerance < rel[j]:
                out.append(f"stage {a.name!r} (reward reliability {rel[i]:.2f}) is ordered "
                           f"before the more reliable stage {b.name!r} ({rel[j]:.2f}): "
                           "train on the more trustworthy reward first, or fix the first "
                           "stage's verifier / reward spec")
    return out


__all__ = ["RELIABILITY_SEED_BASE", "StageReliability", "TemplateReliability",
           "check_stage_order", "measure_reliability", "stage_reliability"]
