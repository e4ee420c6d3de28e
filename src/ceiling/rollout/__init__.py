"""Rollouts: many episodes at once, batched policy turns, JSONL trajectories.

``run_episodes(cards, policy, harness, k=, sampling=, backend=, out=, workers=, seed=,
reward_spec=)`` is the door; ``read_trajectories(path)`` reads a run's JSONL back.
"""

from ._jsonl import JsonlWriter, read_trajectories
from ._runner import RunStats, episode_id, episode_seed, run_episodes
from ._types import Trajectory, Turn

__all__ = ["JsonlWriter", "RunStats", "Trajectory", "Turn", "episode_id", "episode_seed",
           "read_trajectories", "run_episodes"]
