"""The executor seam: where environment resets and steps run.

The rollout loop (:mod:`ceiling.rollout._runner`) keeps the policy on the driver and hands
each round's environment work to an :class:`Executor` as one batch:

- ``start(items)`` opens and resets one environment per ``(episode id, card, seed)``;
- ``step(items)`` runs one action per ``(episode id, action)``;
- ``close(eid)`` releases an episode's environment (best effort, may run later);
- ``map(fn, jobs)`` runs a picklable function over jobs (validation, red-teaming).

Each result is an :class:`Ok` (the value), a :class:`Failed` (the environment raised:
infrastructure, the episode is ``infra_error``), a :class:`Lost` (the worker or its node
died: the episode is re-run from the card's initial state, counted ``retried``) or a
:class:`Straggler` (no answer within its deadline: cancelled, counted ``stragglers``).

Two executors: ``local`` (:class:`LocalExecutor`, a thread pool in this process; the default
and the behaviour ceiling always had: it never loses or abandons an episode) and ``ray``
(:class:`ceiling.rollout._ray.RayExecutor`, worker actors on a Ray cluster). Choose with
:func:`make_executor` (``executor="local" | "ray"``, ``ray_address=None | "auto" |
"HOST:PORT"``; ``CEILING_RAY_ADDRESS`` fills a missing address).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .._errors import ConfigError
from ..cards import TaskCard

EXECUTORS = ("local", "ray")
T = TypeVar("T")


@dataclass(frozen=True)
class EnvConfig:
    """What every environment of a run is built with (travels to Ray workers once)."""

    backend: str = "namespace"
    reward_spec: Any = None
    limits: Any = None
    env_factory: Callable[..., Any] | None = None  # default: ceiling.env.TaskEnv

    def build(self, card: TaskCard) -> Any:
        factory = self.env_factory
        if factory is None:
            from ..env import TaskEnv

            factory = TaskEnv
        return factory(card, backend=self.backend, reward_spec=self.reward_spec,
                       limits=self.limits)


@dataclass(frozen=True)
class Ok:
    value: Any


@dataclass(frozen=True)
class Failed:
    error: BaseException


@dataclass(frozen=True)
class Lost:
    reason: str


@dataclass(frozen=True)
class Straggler:
    after_s: float


Result = Ok | Failed | Lost | Straggler
StartItem = tuple[str, TaskCard, int]  # (episode id, card, seed)
StepItem = tuple[str, Any]  # (episode id, action or an UNPARSEABLE dict)


class Executor(Protocol):
    name: str

    def open(self, cfg: EnvConfig) -> None:
        """Prepare for a run whose environments are built with ``cfg``."""
        ...

    def capacity(self) -> int | None:
        """How many episodes may be live at once (None: no limit beyond concurrency)."""
        ...

    def start(self, items: Sequence[StartItem]) -> list[Result]: ...

    def step(self, items: Sequence[StepItem]) -> list[Result]: ...

    def close(self, eid: str) -> None: ...

    def map(self, fn: Callable[[Any], T], jobs: Sequence[Any],
            progress: Callable[[int], None] | None = None) -> list[T]: ...

    def shutdown(self) -> None:
        """Wait for pending closes and release this run's resources."""
        ...


def timed_step(env: Any, action: Any) -> tuple[Any, ...]:
    """``env.step(action)`` plus its wall time as a sixth element."""
    t = time.monotonic()
    res = env.step(action)
    return (*res, time.monotonic() - t)


class LocalExecutor:
    """A thread pool in this process (sandbox commands are subprocesses: threads overlap).
    Results never come back ``Lost`` or ``Straggler``."""

    name = "local"

    def __init__(self, workers: int = 8) -> None:
        if workers < 1:
            raise ConfigError("workers must be at least 1")
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._envs: dict[str, Any] = {}
        self._closing: list[Future[Any]] = []
        self._cfg = EnvConfig()

    def _ex(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers,
                                            thread_name_prefix="ceiling-env")
        return self._pool

    def open(self, cfg: EnvConfig) -> None:
        self._cfg = cfg

    def capacity(self) -> int | None:
        return None

    def _start_one(self, eid: str, card: TaskCard, seed: int) -> None:
        env = self._cfg.build(card)
        self._envs[eid] = env
        env.reset(seed=seed)

    def start(self, items: Sequence[StartItem]) -> list[Result]:
        futs = [self._ex().submit(self._start_one, eid, card, seed) for eid, card, seed in items]
        return [_collect(f) for f in futs]

    def step(self, items: Sequence[StepItem]) -> list[Result]:
        futs = [self._ex().submit(timed_step, self._envs[eid], action) for eid, action in items]
        return [_collect(f) for f in futs]

    def close(self, eid: str) -> None:
        env = self._envs.pop(eid, None)
        if env is not None:
            self._closing.append(self._ex().submit(env.close))

    def map(self, fn: Callable[[Any], T], jobs: Sequence[Any],
            progress: Callable[[int], None] | None = None) -> list[T]:
        out: list[T] = []
        with ThreadPoolExecutor(max_workers=self.workers) as ex:
            for r in ex.map(fn, jobs):
                out.append(r)
                if progress:
                    progress(1)
        return out

    def shutdown(self) -> None:
        for eid in list(self._envs):
            self.close(eid)
        for f in self._closing:
            try:
                f.result()
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass
        self._closing = []
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _collect(f: Future[Any]) -> Result:
    try:
        return Ok(f.result())
    except Exception as e:  # noqa: BLE001 - the caller decides (infra_error)
        return Failed(e)


def resolve_ray_address(address: str | None) -> str | None:
    """``address`` or ``$CEILING_RAY_ADDRESS``; None (start a Ray instance on this machine),
    ``auto`` or ``HOST:PORT`` (``ray://`` client addresses are refused)."""
    addr = address or os.environ.get("CEILING_RAY_ADDRESS") or None
    if addr is None or addr == "auto":
        return addr
    if addr.startswith("ray://"):
        raise ConfigError(f"Ray client addresses ({addr}) are not supported",
                          where="--ray-address / CEILING_RAY_ADDRESS",
                          fix="run the driver on a cluster node and pass auto or HOST:PORT "
                              "(the GCS address `ray start --head` printed)")
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"Ray address {addr!r} is not auto or HOST:PORT",
                          where="--ray-address / CEILING_RAY_ADDRESS",
                          fix="e.g. --ray-address 10.0.0.5:6379 or --ray-address auto")
    return addr


def make_executor(executor: str | Executor = "local", *, workers: int = 8,
                  ray_address: str | None = None, concurrency: int = 32) -> Executor:
    """The executor a name selects (an Executor object is returned as is)."""
    if not isinstance(executor, str):
        return executor
    if executor == "local":
        return LocalExecutor(workers)
    if executor == "ray":
        from ._ray import RayExecutor

        return RayExecutor(resolve_ray_address(ray_address), concurrency=concurrency)
    raise ConfigError(f"unknown executor {executor!r}", where="--executor",
                      fix=f"use one of {EXECUTORS}")


__all__ = ["EXECUTORS", "EnvConfig", "Executor", "Failed", "LocalExecutor", "Lost", "Ok",
           "Result", "Straggler", "make_executor", "resolve_ray_address", "timed_step"]
