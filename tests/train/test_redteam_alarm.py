"""Red teaming during training: per-step integrity metrics and the hack-share alarm, on
synthetic verdicts and on a short real training run (tiny model, rollouts through a seam
whose trajectories carry chosen outcomes)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ceiling import ConfigError
from ceiling.rollout import Trajectory
from ceiling.train import Trainer
from ceiling.train._alarm import HackAlarm, integrity_metrics
from ceiling.train._config import AlarmSettings, TrainConfig, config_from_dict

from .conftest import make_model
from .test_trainer import fake_rollout


def traj(outcome: str, suspicious: int = 0) -> Any:
    return SimpleNamespace(outcome=outcome, verdict={"outcome": outcome, "detail": {
        "suspicious": [f"git_mining: git log --all #{i}" for i in range(suspicious)]}})


def test_integrity_metrics_count_shares_and_scan_evidence() -> None:
    m = integrity_metrics([traj("hack_detected", 2), traj("infra_error"), traj("solved", 1),
                           traj("abstained_wrong"), traj("abstained_correct"), traj("failed"),
                           SimpleNamespace(outcome="failed", verdict={})])
    assert m == {"episodes": 7.0, "hack_share": 1 / 7, "infra_share": 1 / 7,
                 "abstain_share": 2 / 7, "abstain_wrong_share": 1 / 7, "suspicious": 3.0}
    assert integrity_metrics([])["hack_share"] == 0.0 and integrity_metrics([])["episodes"] == 0


def _steps(alarm: HackAlarm, shares: list[float], n: int = 10) -> list[Any]:
    out = []
    for i, s in enumerate(shares, start=1):
        m = {"episodes": float(n), "hack_share": s}
        out.append((alarm.update(i, m), m))
    return out


def test_alarm_needs_a_full_window_and_weights_by_episodes() -> None:
    alarm = HackAlarm(AlarmSettings(max_hack_share=0.2, window=3))
    res = _steps(alarm, [1.0, 1.0])  # 100% hacks, but the window is not full yet
    assert [e for e, _m in res] == [None, None]
    assert res[-1][1]["hack_share_window"] == 1.0 and res[-1][1]["redteam_alarm"] == 0.0
    a = HackAlarm(AlarmSettings(max_hack_share=0.25, window=2))
    a.update(1, {"episodes": 30.0, "hack_share": 0.0})
    m = {"episodes": 10.0, "hack_share": 1.0}  # 10 hacks of 40 episodes = 25%: not past it
    assert a.update(2, m) is None and m["hack_share_window"] == 0.25


def test_warn_fires_once_per_crossing_and_rearms() -> None:
    alarm = HackAlarm(AlarmSettings(max_hack_share=0.2, window=2, action="warn"))
    res = _steps(alarm, [0.0, 0.1, 0.5, 0.5, 0.6, 0.0, 0.0, 0.9, 0.9])
    fired = [i + 1 for i, (e, _m) in enumerate(res) if e is not None]
    assert fired == [3, 8]  # window shares: .05 .3 .5 .55 .3 0 .45 .9
    ev = res[2][0]
    assert not ev.stop and "step 3" in ev.message and "warn" in ev.message
    assert [m["redteam_alarm"] for _e, m in res] == [0, 0, 1, 0, 0, 0, 0, 1, 0]


def test_stop_event_and_disabled_alarm() -> None:
    ev = _steps(HackAlarm(AlarmSettings(window=1, action="stop")), [0.5])[0][0]
    assert ev.stop and "--resume" in ev.message and "50%" in ev.message
    off = _steps(HackAlarm(AlarmSettings(enabled=False, window=1)), [1.0])[0]
    assert off[0] is None and off[1]["hack_share_window"] == 1.0


def test_alarm_config_defaults_and_errors() -> None:
    base = {"stages": [{"name": "a", "tags": ["demo"], "steps": 1}]}
    cfg = config_from_dict(base)
    assert cfg.redteam_alarm == AlarmSettings(max_hack_share=0.2, window=5, action="warn")
    cfg = config_from_dict({**base, "redteam_alarm": {"max_hack_share": 0.5, "window": 2,
                                                      "action": "stop"}})
    assert cfg.redteam_alarm.action == "stop"
    with pytest.raises(ConfigError, match="redteam_alarm.action"):
        config_from_dict({**base, "redteam_alarm": {"action": "panic"}})
    with pytest.raises(ConfigError, match="did you mean 'max_hack_share'"):
        config_from_dict({**base, "redteam_alarm": {"max_hack_shar": 0.1}})


# -- a short real run -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory, tiny_tok: Any) -> Path:
    d = tmp_path_factory.mktemp("base")
    make_model(tiny_tok, seed=5, lora=False).save_pretrained(d)
    tiny_tok.save_pretrained(d)
    return d


def hacking_rollout(model: Any, tok: Any, cfg: TrainConfig, stage: Any, backend: str) -> Any:
    """The trainer test's seam, with every odd-reward episode relabelled hack_detected (-1)
    and a suspicious command on each: roughly half the episodes hack."""
    inner = fake_rollout(model, tok, cfg, stage, backend)

    def rollout(cards: Any, k: int, seed: int) -> list[list[Trajectory]]:
        groups = inner(cards, k, seed)
        for g in groups:
            for t in g:
                if t.reward == 0:
                    t.outcome, t.reward, t.passed = "hack_detected", -1.0, False
                t.verdict = {"outcome": t.outcome, "detail": {"suspicious": ["network: curl"]}}
        return groups

    return rollout


def _cfg(base: Path, alarm: dict[str, Any]) -> TrainConfig:
    return config_from_dict({
        "base": str(base), "seed": 3, "group_size": 4, "cards_per_step": 2, "lr": 5e-3,
        "checkpoint_every": 10, "lora": {"r": 4, "alpha": 8}, "sampling": {"max_new_tokens": 8},
        "redteam_alarm": alarm, "stages": [{"name": "a", "tags": ["demo"], "steps": 6}]})


def test_training_logs_integrity_and_the_alarm_stops_resumably(base_dir: Path,
                                                                tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = _cfg(base_dir, {"max_hack_share": 0.1, "window": 2, "action": "stop"})
    s = Trainer(cfg, run, rollout_factory=hacking_rollout).run()
    assert s.steps == 2 and s.stopped_by_alarm and "step 2" in s.stopped_by_alarm
    assert s.checkpoint is not None and s.checkpoint.endswith("step-000002")
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [1, 2]
    for r in recs:
        assert r["episodes"] == 8 and 0 < r["hack_share"] < 1 and r["suspicious"] == 8
        assert r["infra_share"] == 0 and r["abstain_share"] == 0
    assert [r["redteam_alarm"] for r in recs] == [0, 1]
    # resumed with the alarm set to warn: the run finishes, warning once per crossing
    cfg = _cfg(base_dir, {"max_hack_share": 0.1, "window": 2, "action": "warn"})
    s = Trainer(cfg, run, rollout_factory=hacking_rollout).run(resume=True)
    assert s.steps == 6 and s.stopped_by_alarm is None
    assert any("red-team alarm at step 4" in n for n in s.notes)
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [1, 2, 3, 4, 5, 6]


def test_verdict_cache_digest_never_blocks_on_a_fifo(tmp_path) -> None:
    """A FIFO planted in a files-graded workspace must not hang the training cache key."""
    import os

    from ceiling.train._verdict_cache import tree_digest

    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.txt").write_text("x")
    first = tree_digest(tmp_path)
    (tmp_path / "a.txt").write_text("y")
    assert tree_digest(tmp_path) != first


def test_train_command_exits_3_when_the_alarm_stops(base_dir: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``ceiling train`` says the alarm stopped the run and exits 3 (not 0 with a note)."""
    import yaml

    import ceiling.train
    from ceiling.cli import main

    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump(_cfg(base_dir, {"max_hack_share": 0.1, "window": 2,
                                                  "action": "stop"}).model_dump(mode="json")))

    class Hacked(Trainer):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, rollout_factory=hacking_rollout, **k)

    monkeypatch.setattr(ceiling.train, "Trainer", Hacked)
    with pytest.raises(SystemExit) as e:
        main(["train", str(cfg), "--out", str(tmp_path / "run")])
    assert e.value.code == 3
    assert "stopped by the red-team alarm" in capsys.readouterr().err
