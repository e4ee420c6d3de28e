"""Rollouts: many episodes at once, batched policy turns, JSONL trajectories."""

from ._types import Trajectory, Turn

__all__ = ["Trajectory", "Turn"]
