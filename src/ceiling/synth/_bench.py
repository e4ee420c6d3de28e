"""``ceiling bench synth``: cards from several real PyPI projects, yield and speed.

Runs :func:`~._repo.synth_repo` over :data:`DEFAULT_PROJECTS` (pure-Python projects whose
sdists ship fast test suites; every fourth one is the held-out split) into one folder,
``per_project`` cards each, within ``minutes``. Resumable like ``synth repo`` (same folder).

The JSON report has the totals (cards, candidates, yield, refusals by reason, cards/min),
``per_project`` and ``per_modifier`` (from the folder's decision log, so a resumed bench
reports everything it made), and the same-run baseline: ``baseline_suite_s`` (one run of
each project's whole suite under the grader, measured in this run's baseline step) and
``card_cost_ratio`` = seconds per validated card / seconds of that suite run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._manifest import decisions, report
from ._repo import RepoOptions, synth_repo

DEFAULT_PROJECTS: tuple[str, ...] = (
    "toolz==0.12.1", "more-itertools==10.2.0", "six==1.16.0", "inflection==0.5.1",
    "parse==1.20.1", "cachetools==5.3.3", "jmespath==1.0.1", "idna==3.6", "funcy==2.0",
    "webencodings==0.5.1", "wcwidth==0.2.13", "semver==3.0.2",
)


def bench_synth(out: str | Path, *, projects: Sequence[str] = DEFAULT_PROJECTS,
                per_project: int = 100, minutes: float = 60.0, workers: int = 2,
                backend: str = "namespace", seed: int = 0,
                progress: Callable[[str, dict[str, Any]], None] | None = None
                ) -> dict[str, Any]:
    """Synthesize up to ``per_project`` cards from each project within ``minutes``."""
    dest = Path(out)
    t0 = time.perf_counter()
    runs: dict[str, Any] = {}
    errors: dict[str, str] = {}
    deadline = t0 + minutes * 60
    for i, spec in enumerate(projects):
        if time.perf_counter() > deadline:
            errors[spec] = "not started: the time budget ran out"
            continue
        left = (deadline - time.perf_counter()) / (len(projects) - i)  # a fair share
        opts = RepoOptions(limit=per_project, seed=seed, backend=backend, workers=workers,
                           split="heldout" if i % 4 == 3 else "train",
                           max_candidates=max(per_project * 4, 20))
        def tick(r: dict[str, Any], s: str = spec) -> None:
            if progress is not None:
                progress(s, r)

        try:
            rep = synth_repo(spec, dest, opts, progress=tick, deadline_s=left)
        except Exception as e:  # noqa: BLE001 - one project's failure is reported, not fatal
            errors[spec] = f"{type(e).__name__}: {e}"[:300]
            continue
        runs[spec] = {k: rep.get(k) for k in ("cards", "candidates", "yield", "cards_total",
                                              "seconds", "cards_per_min", "baseline",
                                              "refusals")}
    secs = time.perf_counter() - t0
    records = decisions(dest).read()
    total = report(records, seconds=sum(float(r.get("seconds", 0)) for r in records))
    suite = {s: (r.get("baseline") or {}).get("run_s") for s, r in runs.items()}
    per_card = (total["seconds"] / total["cards"]) if total["cards"] else None
    mean_suite = [v for v in suite.values() if v]
    base = sum(mean_suite) / len(mean_suite) if mean_suite else None
    return {
        "cards": total["cards"], "candidates": total["candidates"], "yield": total["yield"],
        "refusals": total["refusals"], "cards_per_min_candidates": total["cards_per_min"],
        "wall_seconds_this_run": round(secs, 1),
        "cards_this_run": sum(int(r.get("cards") or 0) for r in runs.values()),
        "cards_per_min_this_run": round(sum(int(r.get("cards") or 0) for r in runs.values())
                                        / (secs / 60), 2) if secs > 0 else None,
        "projects": list(projects), "projects_with_cards": sum(
            1 for v in total["per_project"].values() if v["cards"]),
        "per_project": total["per_project"], "per_modifier": total["per_modifier"],
        "per_bug_count": total["per_bug_count"], "runs": runs, "errors": errors,
        "baseline_suite_s": suite,
        "card_cost_ratio": round(per_card / base, 3) if per_card and base else None,
        "out": str(dest), "workers": workers, "backend": backend,
    }
