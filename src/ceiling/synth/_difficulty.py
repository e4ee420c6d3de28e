"""Measured difficulty: a base policy's pass rate on the cards a synth run wrote.

The generator's ``difficulty`` (bugs combined, failing tests, recovered pieces) is an
estimate made before any model has tried a card. Given a policy, :func:`measure_difficulty`
plays it ``k`` times on every card of the manifest (the real rollout: sandboxed episodes,
the card's grader) and records, per card, its pass rate: the measured difficulty a
curriculum or a difficulty filter can use.

``DIR/difficulty.jsonl``: one line per (card, policy, k): ``card``, ``id``, ``policy``,
``k``, ``passes``, ``graded`` (episodes that ended without ``infra_error``, which never
counts against the policy), ``pass_rate`` (``passes / graded``; ``null`` when none was
graded), ``estimate`` (the generator's difficulty). Episodes stream to
``DIR/.synth/difficulty/<policy slug>-k<k>.jsonl`` first, so a killed measurement resumes
without replaying finished episodes, and a card already measured for the same policy and
``k`` is skipped on a later call.

The summary (the ``difficulty_measured`` key of the synth report) gives the mean pass rate,
a histogram over ``unsolved`` (0), ``hard`` (0 < rate <= 0.5), ``easy`` (0.5 < rate < 1),
``solved`` (1), and the mean pass rate per estimated difficulty, so a reader sees whether
the generator's estimate orders the cards the way the policy does.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cards import TaskCard, load_card
from ._manifest import Log, manifest

BUCKETS = ("unsolved", "hard", "easy", "solved")


def _slug(policy: str) -> str:
    tail = re.sub(r"[^A-Za-z0-9]+", "-", policy).strip("-")[:40]
    return f"{tail}-{hashlib.sha256(policy.encode()).hexdigest()[:8]}"


def _bucket(rate: float) -> str:
    if rate <= 0.0:
        return "unsolved"
    if rate >= 1.0:
        return "solved"
    return "hard" if rate <= 0.5 else "easy"


def difficulty_log(out: Path) -> Log:
    return Log(out / "difficulty.jsonl")


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean pass rate, the bucket histogram and the mean per estimated difficulty."""
    rated = [r for r in rows if r.get("pass_rate") is not None]
    hist = dict.fromkeys(BUCKETS, 0)
    by_est: dict[str, list[float]] = {}
    for r in rated:
        hist[_bucket(float(r["pass_rate"]))] += 1
        by_est.setdefault(str(r.get("estimate")), []).append(float(r["pass_rate"]))
    mean = sum(float(r["pass_rate"]) for r in rated) / len(rated) if rated else None
    return {"cards": len(rows), "rated": len(rated),
            "mean_pass_rate": None if mean is None else round(mean, 4),
            "histogram": hist,
            "by_estimate": {k: {"cards": len(v), "mean_pass_rate": round(sum(v) / len(v), 4)}
                            for k, v in sorted(by_est.items(), key=lambda kv: _num(kv[0]))}}


def _num(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        return float("inf")


def measure_difficulty(out: str | Path, policy: str, *, k: int = 4, backend: str = "namespace",
                       workers: int = 2, seed: int = 0, executor: str = "local",
                       ray_address: str | None = None,
                       only: Sequence[str] | None = None) -> dict[str, Any]:
    """Play ``policy`` ``k`` times on each manifest card of ``out`` not yet measured for it
    (``only``: restrict to these card folder names); append the rows to
    ``difficulty.jsonl`` and return :func:`summarize` over every row of this policy and k."""
    from ..policies import load_policy
    from ..rollout import run_episodes

    root = Path(out)
    log = difficulty_log(root)
    done = {r["card"] for r in log.read() if r.get("policy") == policy and r.get("k") == k}
    wanted = set(only) if only is not None else None
    entries = [m for m in manifest(root).read()
               if (wanted is None or m.get("card") in wanted) and m.get("card") not in done
               and (root / str(m.get("card"))).is_dir()]
    if entries:
        cards: list[TaskCard] = [load_card(root / str(m["card"])) for m in entries]
        stream = root / ".synth" / "difficulty" / f"{_slug(policy)}-k{k}.jsonl"
        stream.parent.mkdir(parents=True, exist_ok=True)
        trajs = run_episodes(cards, load_policy(policy), k=k, backend=backend, out=stream,
                             workers=workers, seed=seed, progress=False, executor=executor,
                             ray_address=ray_address)
        for m, card in zip(entries, cards, strict=True):
            mine = [t for t in trajs if t.card_id == card.id]
            graded = [t for t in mine if str(t.outcome) != "infra_error"]
            passes = sum(1 for t in graded if t.passed)
            log.append({"card": m["card"], "id": card.id, "policy": policy, "k": k,
                        "passes": passes, "graded": len(graded),
                        "pass_rate": round(passes / len(graded), 4) if graded else None,
                        "estimate": m.get("difficulty")})
    rows = [r for r in log.read() if r.get("policy") == policy and r.get("k") == k
            and (wanted is None or r.get("card") in wanted)]
    return {"policy": policy, "k": k, **summarize(rows)}
