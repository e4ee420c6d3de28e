"""The JSONL writer's crash safety and the progress bar, without environments."""

from __future__ import annotations

from pathlib import Path

import pytest

from ceiling._errors import ConfigError
from ceiling.rollout import JsonlWriter, Trajectory, read_trajectories
from ceiling.rollout._progress import RunProgress


def _traj(i: int, passed: bool = True) -> Trajectory:
    return Trajectory(episode_id=f"c#{i}", card_id="c", card_hash="h", template=None,
                      type="terminal_ops", horizon="short", difficulty=1, split="train",
                      feasible=True, faults=False, seed=i, sample=i, policy="p",
                      harness_fingerprint="f", sampling={}, passed=passed, outcome="solved")


def test_writer_cuts_a_torn_tail_and_appends(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    with JsonlWriter(out) as w:
        w.write(_traj(0))
    out.write_bytes(out.read_bytes() + b'{"episode_id": "c#1", "car')  # torn record
    assert [t.episode_id for t in read_trajectories(out)] == ["c#0"]
    with pytest.raises(ConfigError, match="incomplete"):
        read_trajectories(out, strict=True)
    with JsonlWriter(out) as w:
        w.write(_traj(2))
    assert [t.episode_id for t in read_trajectories(out, strict=True)] == ["c#0", "c#2"]
    with pytest.raises(ConfigError, match="no trajectory file"):
        read_trajectories(tmp_path / "missing.jsonl")


def test_progress_counts_resumed_and_new_episodes() -> None:
    bar = RunProgress(total=3, done=[_traj(0, passed=False)], enabled=True)
    bar.advance(_traj(1))
    bar.advance(_traj(2))
    bar.close()
    assert (bar.count, bar.new, bar.passed) == (3, 2, 2)
