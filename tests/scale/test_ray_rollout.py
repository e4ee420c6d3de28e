"""The ray executor on a real 3-raylet cluster: same results as local, lost nodes re-run.

One shared cluster (conftest); small suites; no timing assertions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ceiling.cards import TaskCard
from ceiling.harness import HarnessConfig
from ceiling.policies import Generation, PolicyRequest, SamplingParams, load_policy
from ceiling.rollout import RunStats, Trajectory, read_trajectories, run_episodes
from ceiling.rollout._ray import RayExecutor

NODE = {"num_cpus": 1, "resources": {"ceiling_env": 2}}  # as conftest.py adds them




_CLOCK = re.compile(r"[A-Z][a-z]{2} +\d+ +\d\d:\d\d")  # `ls -l` times: when a node wrote
# the layer to its store, not part of the task


def _view(trajs: Sequence[Trajectory]) -> dict[str, tuple[Any, ...]]:
    """What must not depend on the executor, per episode."""
    return {t.episode_id: (t.outcome, t.reward, t.passed, t.card_hash,
                           [x.text for x in t.turns],
                           [_CLOCK.sub("<time>", x.observation) for x in t.turns])
            for t in trajs}


def _diff(a: dict[str, tuple[Any, ...]], b: dict[str, tuple[Any, ...]]) -> str:
    """The first differing turn of each differing episode (for the assertion message)."""
    out = []
    for eid in sorted(set(a) | set(b)):
        x, y = a.get(eid), b.get(eid)
        if x != y:
            turns = [(i, p, q) for i, (p, q) in enumerate(zip(x[5], y[5], strict=False))
                     if p != q] if x and y else []
            out.append(f"{eid}: {x[:3] if x else None} vs {y[:3] if y else None} "
                       f"{turns[:1]}")
    return "\n".join(out)


CFG = HarnessConfig(format="line")


@pytest.fixture(scope="module")
def local_run(suite: list[TaskCard], backend: str) -> list[Trajectory]:
    """The reference: the suite on the local executor (scripted:random, k=2, seed 3)."""
    return run_episodes(suite, load_policy("scripted:random"), CFG, k=2, seed=3,
                        backend=backend, progress=False)


def test_two_nodes_give_the_local_results_card_by_card(
        cluster: Any, suite: list[TaskCard], backend: str,
        local_run: list[Trajectory]) -> None:
    ex = RayExecutor(cluster.address)
    st = RunStats()
    got = run_episodes(suite, load_policy("scripted:random"), CFG, k=2, seed=3,
                       backend=backend, progress=False, executor=ex, stats=st)
    assert st.executor == "ray" and st.retried == 0 and st.episodes == 12
    assert [t.episode_id for t in got] == [t.episode_id for t in local_run]
    assert _view(got) == _view(local_run), _diff(_view(got), _view(local_run))
    assert len(ex.placed) == 2 and sum(ex.placed.values()) == 12  # both nodes worked
    # not a trivial comparison: the random plans took different paths on every episode
    assert len({tuple(x.text for x in t.turns) for t in got}) >= 10


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
        cluster: Any, suite: list[TaskCard], backend: str, tmp_path: Path,
        local_run: list[Trajectory]) -> None:
    victim = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    out = tmp_path / "run.jsonl"
    st = RunStats()
    ex = RayExecutor(cluster.address)
    pol = _KillAt("scripted:random", 2,
                  lambda: cluster.remove_node(victim, allow_graceful=False))
    trajs = run_episodes(suite, pol, CFG, k=2, seed=3, backend=backend, progress=False,
                         executor=ex, stats=st, out=out, concurrency=12)
    assert pol.calls >= 2 and len(ex.placed) == 3  # the victim hosted episodes when it died
    assert st.retried >= 1 and ex.lost_workers >= 1
    ids = [json.loads(x)["episode_id"] for x in out.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 12  # every episode exactly once
    assert all(t.outcome != "infra_error" for t in trajs)
    got = _view(read_trajectories(out))
    assert got == _view(local_run), _diff(got, _view(local_run))
    # each re-run is on its episode's record (an episode can be lost twice: re-placed on
    # the dying node before the cluster marked it dead)
    assert sum(int(t.timings.get("retries", 0)) for t in trajs) == st.retried


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


def test_eval_runs_on_the_cluster(cluster: Any) -> None:
    import ceiling.cli.eval_cmds  # noqa: F401 - registers the command
    from ceiling.cli._app import app

    res = CliRunner().invoke(app, ["eval", "--policy", "scripted:oracle", "--suite",
                                   "terminal_ops", "--n", "2", "--json", "--executor", "ray",
                                   "--ray-address", cluster.address])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["episodes"] == 2 and rep["infra_errors"] == 0 and rep["pass@1"]["value"] == 1.0


def test_stages_and_synth_validation_run_on_the_cluster(cluster: Any, tmp_path: Path) -> None:
    """The two remaining commands that run episodes: `ceiling stages` (reward reliability
    per stage) and `ceiling synth trajectories` (its validation gates) with --executor ray
    give what they give locally."""
    import ceiling.cli.bench_train_cmds
    import ceiling.cli.synth_cmds  # noqa: F401
    from ceiling.cli._app import app

    ray_opts = ["--executor", "ray", "--ray-address", cluster.address]
    cfg = tmp_path / "t.yaml"
    cfg.write_text("stages:\n  - name: one\n    templates: [terminal_ops/demo-copy-v1]\n")
    res = CliRunner().invoke(app, ["stages", str(cfg), "--json", "--exploits", "1",
                                   "--no-cache", *ray_opts])
    assert res.exit_code == 0, res.output
    st = json.loads(res.stdout)["stages"][0]
    assert st["reliability"] == 1.0 and st["episodes"] == 3  # oracle, null, one exploit
    trajs = tmp_path / "t.jsonl"
    trajs.write_text(json.dumps({"id": "rotate", "steps": [
        {"tool": "read", "args": {"path": "logs/app.log"}, "output": "one\ntwo"},
        {"tool": "run", "args": {"cmd": "mv logs/app.log logs/app.log.1"}},
        {"tool": "run", "args": {"cmd": ": > logs/app.log"}}]}) + "\n")
    res = CliRunner().invoke(app, ["synth", "trajectories", str(trajs), "--out",
                                   str(tmp_path / "cards"), "--json", *ray_opts])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["cards"] == 1 and rep["trajectories"] == 1, rep
