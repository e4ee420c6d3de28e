"""``ceiling bench env``: oracle episodes per second and what the verifier costs.

For each card the oracle plays one episode in a :class:`~ceiling.env.TaskEnv`; the
verifier's own time is read from the verdict (``duration_s``: freeze, copy, scans, the
hidden tests, lint, milestones). Next to it, the *bare* test run the verifier wraps is timed
on the same final state: ``python -m pytest -q`` on the hidden tests with WORKSPACE set, no
isolation flags, no canaries, no scans, no fork. For ``subject``/``files`` cards it runs on
the host with the subject plugin loaded by file (``-p ceiling_grader_plugin``, without
importing ceiling; no subject behind it, so a ``subject`` call fails at once: the bare run
is pytest's own start-up, collection and run); for ``inprocess`` cards inside the episode's sandbox with its interpreter.

Figures: ``verifier_s_p50`` (per-episode grading, median), ``bare_pytest_s_p50`` and
``grading_ratio_p50`` = their ratio (the issue's target: <= 0.3), plus the means and
``verifier_overhead_ratio`` = mean verifier seconds / mean bare seconds. Throughput
(``episodes_per_s``, one episode at a time) and episode times exclude the bare runs.
"""

from __future__ import annotations

import inspect
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from ..cards import TaskCard, write_tree
from ..env import TaskEnv
from ..sandbox import Sandbox
from ..verify import Verdict, Verifier, oracle_plan


class _TimingVerifier(Verifier):
    """Runs the real verifier, then the bare pytest on the same (unfrozen) state."""

    def __init__(self) -> None:
        super().__init__()
        self.bare: list[float] = []

    def verify(self, card: TaskCard, sandbox: Sandbox, **kw: Any) -> Verdict:
        v = super().verify(card, sandbox, **kw)
        if card.feasible and kw.get("ended") == "submit":
            self.bare.append(bare_pytest(card, sandbox))
        return v


def bare_pytest(card: TaskCard, sandbox: Sandbox) -> float:
    """Seconds of a plain ``python -m pytest -q`` of the hidden tests on the current state."""
    root = Path(tempfile.mkdtemp(prefix="ceiling-bare-"))
    try:
        if card.acceptance.runner in ("subject", "files"):
            write_tree(card.tests, root / "tests")
            here = Path(inspect.getfile(Verifier)).resolve().parent  # verify/, by file
            (root / "plugin").mkdir()
            (root / "plugin" / "ceiling_grader_plugin.py").write_bytes(
                (here / "_plugin.py").read_bytes())
            (root / "plugin" / "_subject_server.py").write_bytes(
                (here / "_subject_server.py").read_bytes())
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-p", "ceiling_grader_plugin", str(root / "tests")], check=False,
                           capture_output=True, cwd=root, timeout=120,
                           env={"WORKSPACE": str(sandbox.host_path()), "PATH": "/usr/bin:/bin",
                                "PYTHONPATH": str(root / "plugin")})
            return time.perf_counter() - t0
        where = "/tmp/bare-tests"
        if sandbox.backend == "local":
            write_tree(card.tests, root)
            where = str(root)
        else:
            for rel, e in card.tests.items():
                sandbox.write(f"{where}/{rel}", e.data)
        python = sandbox.python
        t0 = time.perf_counter()
        sandbox.exec([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", where],
                     timeout=120)
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_env(cards: Sequence[TaskCard], *, backend: str = "namespace") -> dict[str, Any]:
    """Play the oracle once per card and report throughput and verifier overhead."""
    plan = oracle_plan()
    verifier = _TimingVerifier()
    verify_s: list[float] = []
    episode_s: list[float] = []
    outcomes: dict[str, int] = {}
    t_all = time.perf_counter()
    for card in cards:
        t0, n_bare = time.perf_counter(), len(verifier.bare)
        env = TaskEnv(card, backend=backend, verifier=verifier)
        try:
            env.reset(seed=0)
            done, info = False, cast(dict[str, Any], {})
            while not done:
                _o, _r, term, trunc, info = env.step(plan.next_action(card, env.history))
                done = term or trunc
        finally:
            env.close()
        v: Verdict = info["verdict"]
        episode_s.append(time.perf_counter() - t0 - sum(verifier.bare[n_bare:]))
        verify_s.append(v.duration_s)
        outcomes[v.outcome.value] = outcomes.get(v.outcome.value, 0) + 1
    wall = time.perf_counter() - t_all - sum(verifier.bare)  # the bare runs are not episodes
    graded = [s for s in verify_s if s > 0]
    mean_v = statistics.fmean(verify_s) if verify_s else 0.0
    mean_bare = statistics.fmean(verifier.bare) if verifier.bare else None
    p50_v = statistics.median(graded) if graded else None
    p50_bare = statistics.median(verifier.bare) if verifier.bare else None
    return {
        "backend": backend, "episodes": len(cards), "policy": "scripted:oracle",
        "episodes_per_s": round(len(cards) / wall, 3) if wall else None,
        "episode_s_p50": round(statistics.median(episode_s), 4) if episode_s else None,
        "verifier_s_mean": round(mean_v, 4),
        "verifier_s_p50": round(p50_v, 4) if p50_v is not None else None,
        "bare_pytest_s_mean": round(mean_bare, 4) if mean_bare is not None else None,
        "bare_pytest_s_p50": round(p50_bare, 4) if p50_bare is not None else None,
        "grading_ratio_p50": round(p50_v / p50_bare, 3) if p50_v and p50_bare else None,
        "runners": sorted({c.acceptance.runner for c in cards}),
        "bare_runs": len(verifier.bare),
        "verifier_overhead_ratio": round(mean_v / mean_bare, 3) if mean_bare else None,
        "outcomes": outcomes, "wall_s": round(wall, 2),
    }
