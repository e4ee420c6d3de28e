"""The rollout object over the executor seam: choosing an executor, lost and straggling
episodes (injected through a LocalExecutor subclass), and resume against a changed card."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from ceiling._errors import ConfigError
from ceiling.cards import TaskCard
from ceiling.harness import HarnessConfig
from ceiling.policies import load_policy
from ceiling.rollout import (
    Rollout,
    RolloutSpec,
    RunStats,
    make_executor,
    map_jobs,
    read_trajectories,
    resolve_ray_address,
    run_episodes,
)
from ceiling.rollout._executor import LocalExecutor, Lost, Result, StepItem, Straggler


def test_choosing_an_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    assert make_executor("local", workers=3).name == "local"
    with pytest.raises(ConfigError, match="unknown executor 'dask'"):
        make_executor("dask")
    monkeypatch.delenv("CEILING_RAY_ADDRESS", raising=False)
    assert resolve_ray_address(None) is None and resolve_ray_address("auto") == "auto"
    assert resolve_ray_address("10.0.0.5:6379") == "10.0.0.5:6379"
    monkeypatch.setenv("CEILING_RAY_ADDRESS", "head:6379")
    assert resolve_ray_address(None) == "head:6379"
    with pytest.raises(ConfigError, match="client addresses"):
        resolve_ray_address("ray://head:10001")
    with pytest.raises(ConfigError, match="not auto or HOST:PORT"):
        resolve_ray_address("head")
    assert map_jobs(lambda x: x * x, [1, 2, 3], workers=2) == [1, 4, 9]


class _Faulty(LocalExecutor):
    """The local executor, but the first step of ``lose`` comes back Lost (its worker
    died) and every step of ``late`` comes back a Straggler."""

    def __init__(self, lose: str, late: str | None = None) -> None:
        super().__init__(workers=2)
        self.lose, self.late, self.lost = lose, late, 0

    def step(self, items: Sequence[StepItem]) -> list[Result]:
        out = super().step(items)
        for i, (eid, _a) in enumerate(items):
            if eid == self.lose and not self.lost:
                self.lost += 1
                self.close(eid)  # the env died with its worker
                out[i] = Lost("injected: worker died")
            elif eid == self.late:
                out[i] = Straggler(1.0)
        return out


def test_a_lost_episode_reruns_from_the_start_and_is_written_once(
        demo_cards: list[TaskCard], backend: str, tmp_path: Path) -> None:
    cards = demo_cards[:3]
    out = tmp_path / "run.jsonl"
    lose, late = f"{cards[0].id}#1", f"{cards[2].id}#0"
    st = RunStats()
    roll = Rollout(RolloutSpec(cards=cards, policy=load_policy("scripted:oracle"),
                               harness=HarnessConfig(format="line"), k=2, backend=backend,
                               out=out, progress=False, stats=st,
                               executor=_Faulty(lose, late)))
    trajs = roll.run()
    assert st.retried == 1 and st.stragglers == 1 and st.episodes == 6
    ids = [json.loads(x)["episode_id"] for x in out.read_text().splitlines()]
    assert sorted(ids) == sorted(t.episode_id for t in trajs) and len(set(ids)) == 6
    by = {t.episode_id: t for t in trajs}
    assert by[lose].outcome == "solved" and by[lose].timings["retries"] == 1.0
    twin = by[f"{cards[0].id}#0"]  # same card, same plan: the rerun started from scratch
    assert [x.action for x in by[lose].turns] == [x.action for x in twin.turns]
    assert by[late].outcome == "infra_error" and "straggler" in (by[late].error or "")
    assert all(t.outcome == "solved" for e, t in by.items() if e != late)


def test_resume_reruns_episodes_whose_card_changed(backend: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from ceiling.envs import make
    from ceiling.envs._secret import ENV_VAR

    out = tmp_path / "run.jsonl"
    pol = load_policy("scripted:oracle")
    first = [make("terminal_ops/demo-create-v1", seed=1), make("terminal_ops/demo-copy-v1",
                                                               seed=2)]
    run_episodes(first, pol, backend=backend, out=out, progress=False)
    monkeypatch.setenv(ENV_VAR, "ab" * 32)  # another installation secret: other card content
    changed = make("terminal_ops/demo-create-v1", seed=1)
    assert changed.id == first[0].id and changed.content_id() != first[0].content_id()
    st = RunStats()
    again = run_episodes([changed, first[1]], pol, backend=backend, out=out, progress=False,
                         stats=st)
    assert st.skipped == 1 and st.episodes == 1  # only the changed card ran again
    assert [t.card_hash for t in again] == [changed.content_id(), first[1].content_id()]
    assert len(out.read_text().splitlines()) == 3
    kept = {t.episode_id: t.card_hash for t in read_trajectories(out)}
    assert kept[f"{changed.id}#0"] == changed.content_id()  # the new record wins


def test_the_training_yaml_names_the_executor() -> None:
    import yaml

    from ceiling.train._config import config_from_dict

    data = yaml.safe_load((Path(__file__).parents[2] / "examples/train_demo.yaml").read_text())
    assert config_from_dict(data).executor == "local"
    cfg = config_from_dict({**data, "executor": "ray", "ray_address": "auto"})
    assert (cfg.executor, cfg.ray_address) == ("ray", "auto")
    with pytest.raises(ConfigError, match="executor"):
        config_from_dict({**data, "executor": "dask"})


def test_cluster_messages_go_to_stderr_not_to_a_json_report(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Ray's driver prints a lost node's notice to stdout from a thread (CI: it broke
    `envs validate --json --executor ray`); connecting routes those messages to stderr."""
    pytest.importorskip("ray")
    from ray._private import worker as w

    from ceiling.rollout._ray import _cluster_messages_to_stderr

    _cluster_messages_to_stderr()
    _cluster_messages_to_stderr()  # idempotent: one wrapper, not a chain
    assert getattr(w.print_to_stdstream, "_ceiling_stderr", False)
    w.print_to_stdstream({"lines": ["The node with node id: x has been marked dead"],
                          "pid": "raylet", "is_err": False}, ignore_prefix=False)
    out, err = capsys.readouterr()
    assert out == "" and "marked dead" in err
