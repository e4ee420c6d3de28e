"""Rollouts: many episodes at once, batched policy turns, JSONL trajectories.

``run_episodes(cards, policy, harness, k=, sampling=, backend=, out=, workers=, seed=,
reward_spec=, executor=, ray_address=)`` is the door (a :class:`Rollout` over one
:class:`RolloutSpec`); ``read_trajectories(path)`` reads a run's JSONL back. Environment
steps run on an executor: ``local`` (threads, the default) or ``ray`` (worker actors on a
cluster); ``map_jobs`` runs validation-style jobs on either.
"""

from ._bench import run_bench
from ._executor import EXECUTORS, make_executor, resolve_ray_address
from ._jsonl import JsonlWriter, read_trajectories
from ._runner import (
    Rollout,
    RolloutSpec,
    RunStats,
    episode_id,
    episode_seed,
    map_jobs,
    run_episodes,
)
from ._types import Trajectory, Turn

__all__ = [
    "EXECUTORS", "JsonlWriter", "Rollout", "RolloutSpec", "RunStats", "Trajectory", "Turn",
    "episode_id", "episode_seed", "make_executor", "map_jobs", "read_trajectories",
    "resolve_ray_address", "run_bench", "run_episodes"
]
