"""The ray executor on a real 3-raylet cluster: same results as local, lost nodes re-run.

One shared cluster (conftest); small suites; no timing assertions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ceiling.cards import TaskCard
from ceiling.harness import HarnessConfig
from ceiling.policies import Generation, PolicyRequest, SamplingParams, load_policy
from ceiling.rollout import RunStats, Trajectory, read_trajectories, run_episodes
from ceiling.rollout._ray import RayExecutor

NODE = {"num_cpus": 1, "resources": {"ceiling_env": 2}}  # as conftest.py adds them




def _view(trajs: Sequence[Trajectory]) -> dict[str, tuple[Any, ...]]:
    """What must not depend on the executor, per episode."""
    return {t.episode_id: (t.outcome, t.reward, t.passed, t.card_hash,
                           [x.text for x in t.turns], [x.observation for x in t.turns])
            for t in trajs}


def test_two_nodes_give_the_local_results_card_by_card(cluster: Any, suite: list[TaskCard],
                                                       backend: str) -> None:
    cfg = HarnessConfig(format="line")
    for spec in ("scripted:random", "scripted:oracle"):
        local = run_episodes(suite, load_policy(spec), cfg, k=2, seed=3, backend=backend,
                             progress=False)
        ex = RayExecutor(cluster.address)
        st = RunStats()
        ray = run_episodes(suite, load_policy(spec), cfg, k=2, seed=3, backend=backend,
                           progress=False, executor=ex, stats=st)
        assert st.executor == "ray" and st.retried == 0 and st.episodes == 12
        assert [t.episode_id for t in ray] == [t.episode_id for t in local]
        assert _view(ray) == _view(local)
        assert len(ex.placed) == 2 and sum(ex.placed.values()) == 12  # both nodes worked
    assert {t.outcome for t in ray} == {"solved", "abstained_correct"}
    assert len({t.outcome for t in local} | {t.reward for t in local}) > 1


class _KillAt:
    """A scripted policy that runs ``act`` (kill a node) before its ``n``-th batch."""

    def __init__(self, spec: str, n: int, act: Callable[[], None]) -> None:
        self.inner = load_policy(spec)
        self.spec = self.inner.spec
        self.n, self.act, self.calls = n, act, 0

    def generate(self, requests: Sequence[PolicyRequest],
                 sampling: SamplingParams) -> list[Generation]:
        self.calls += 1
        if self.calls == self.n:
            self.act()
        return self.inner.generate(requests, sampling)

    def end_episode(self, eid: str) -> None:
        self.inner.end_episode(eid)  # type: ignore[attr-defined]


def test_a_node_killed_mid_run_loses_no_episode_and_writes_each_once(
        cluster: Any, suite: list[TaskCard], backend: str, tmp_path: Path) -> None:
    cfg = HarnessConfig(format="line")
    victim = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    out = tmp_path / "run.jsonl"
    st = RunStats()
    ex = RayExecutor(cluster.address)
    pol = _KillAt("scripted:random", 2,
                  lambda: cluster.remove_node(victim, allow_graceful=False))
    trajs = run_episodes(suite, pol, cfg, k=2, seed=4, backend=backend, progress=False,
                         executor=ex, stats=st, out=out, concurrency=12)
    assert pol.calls >= 2 and len(ex.placed) == 3  # the victim hosted episodes when it died
    assert st.retried >= 1 and ex.lost_workers >= 1
    ids = [json.loads(x)["episode_id"] for x in out.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 12  # every episode exactly once
    assert all(t.outcome != "infra_error" for t in trajs)
    local = run_episodes(suite, load_policy("scripted:random"), cfg, k=2, seed=4,
                         backend=backend, progress=False)
    assert _view(read_trajectories(out)) == _view(local)
    retried = [t for t in trajs if t.timings.get("retries")]
    assert len(retried) == st.retried


def test_validate_and_redteam_run_on_the_cluster(cluster: Any) -> None:
    import ceiling.cli.verify_cmds  # noqa: F401 - registers the commands
    from ceiling.cli._app import app

    ray_opts = ["--json", "--executor", "ray", "--ray-address", cluster.address]
    res = CliRunner().invoke(app, ["envs", "validate", "terminal_ops/demo-create-v1", "--n",
                                   "2", "--repeats", "1", *ray_opts])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["executor"] == "ray" and rep["ok"] and rep["oracle_solved"] == 2
    assert rep["null_solved"] == 0 and rep["exploit_runs"] == 2 and not rep["infra_errors"]
    res = CliRunner().invoke(app, ["redteam", "--family", "terminal_ops/demo-create-v1",
                                   "--n", "2", "--exploit", "delete_tests", "--exploit",
                                   "hardcode_outputs", *ray_opts])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["executor"] == "ray" and rep["runs"] >= 2 and rep["positive_total"] == 0
    assert rep["infra_errors"] == 0
