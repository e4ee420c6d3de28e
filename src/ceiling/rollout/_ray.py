"""The Ray executor: environment workers as Ray actors, one per env slot a node offers.

Workers. A node offers ``ceiling_env`` slots when it was started with
``ray start --resources '{"ceiling_env": N}'`` (a user reserves cores that way); a cluster
where no node has that resource gets one worker per CPU, each holding one CPU. Every worker
is pinned to its node (``NodeAffinitySchedulingStrategy``), hosts several episodes at once
(a threaded actor: steps are mostly sandbox subprocesses) and builds each episode's
environment and sandbox itself; an episode goes to the least loaded live worker.

Cards travel by content id: the driver ``ray.put``s each distinct card once and sends its
id with a boxed reference; a worker fetches the card only the first time it sees the id
(Ray's object store keeps one copy per node) and keeps it; the sandbox layers are then
materialised in the node's own layer store (``$CEILING_HOME/layers``, content-addressed, so
a layer is written once per node).

Faults (Ray actors restart 0 times and actor calls run at most once by default, and this
executor keeps those defaults): a call that fails because its worker or node died is
``Lost``; every episode of that worker is lost with it, and the rollout re-runs them from
the card's initial state. Dead workers are replaced on nodes that are still alive when the
next run opens the executor (or at once when none is left). A step
that does not answer within the card's ``episode_timeout_s`` + ``command_timeout_s`` +
``straggler_grace_s`` of the episode's start is a ``Straggler``: its worker is killed (a
running actor call cannot be interrupted), the episode is cancelled, and the worker's other
episodes are ``Lost`` (re-run).

Connection: an ``address`` (``auto`` or ``HOST:PORT``) joins a running cluster; None starts
a one-node Ray instance on this machine (no dashboard; ``RAY_AUTH_MODE=disabled`` unless
set). A process already connected to Ray (``ray.init`` done) is used as it is. Workers are
kept between runs of the same process (a training loop pays their start once).

Limits: the driver must run on a cluster node (no ``ray://`` client); every node needs
the ``ceiling`` package, its runtime and root for the namespace sandbox (docs/scale-out.md).
``map`` (validation, red-teaming) runs one job per worker at a time on the same workers
(so it never waits for slots the workers hold); a job lost with its worker runs again
elsewhere (each job is a pure function of its card and plan).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._errors import ConfigError
from ..cards import TaskCard
from ._executor import (
    EnvConfig,
    Failed,
    Lost,
    Ok,
    Result,
    StartItem,
    StepItem,
    Straggler,
    timed_step,
)

RESOURCE = "ceiling_env"
WORKER_THREADS = 64  # calls one worker runs at once (episodes it may host)
CARD_CACHE = 256  # cards a worker keeps by content id
MAP_RETRIES = 3  # re-runs of a map job lost with its worker
CARD_REFS = 4096  # cards the driver keeps in the object store between runs
T = TypeVar("T")


class EnvWorker:
    """One environment worker (made a Ray actor by :func:`_actor_class`)."""

    def __init__(self) -> None:
        self._envs: dict[str, Any] = {}
        self._cards: OrderedDict[str, TaskCard] = OrderedDict()
        self._cfgs: dict[str, EnvConfig] = {}
        self._fns: dict[str, Any] = {}
        self._lock = threading.Lock()

    def node(self) -> tuple[str, int]:
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def _card(self, cid: str, box: list[Any] | None) -> TaskCard:
        import ray

        with self._lock:
            card = self._cards.get(cid)
            if card is not None:
                self._cards.move_to_end(cid)
                return card
        if box is None:  # the driver's record of this worker's cache is kept smaller
            raise RuntimeError(f"card {cid} is not cached on this worker")
        card = ray.get(box[0])
        with self._lock:
            self._cards[cid] = card
            while len(self._cards) > CARD_CACHE:
                self._cards.popitem(last=False)
        return card

    def _cfg(self, key: str, box: list[Any] | None) -> EnvConfig:
        import ray

        cfg = self._cfgs.get(key)
        if cfg is None:
            if box is None:
                raise RuntimeError(f"run settings {key} are not cached on this worker")
            cfg = self._cfgs[key] = ray.get(box[0])
        return cfg

    def start(self, eid: str, cid: str, card_box: list[Any] | None, cfg_key: str,
              cfg_box: list[Any] | None, seed: int) -> float:
        """Build and reset the episode's environment; returns the seconds it took here."""
        t = time.monotonic()
        card = self._card(cid, card_box)
        env = self._cfg(cfg_key, cfg_box).build(card)
        old = self._envs.pop(eid, None)
        if old is not None:
            old.close()
        self._envs[eid] = env
        env.reset(seed=seed)
        return time.monotonic() - t

    def step(self, eid: str, action: Any) -> tuple[Any, ...]:
        return timed_step(self._envs[eid], action)

    def close(self, eid: str) -> None:
        env = self._envs.pop(eid, None)
        if env is not None:
            env.close()

    def run(self, key: str, fn_box: list[Any], job: Any) -> Any:
        """``fn(job)`` (validation-style jobs); ``fn`` is fetched once per key."""
        import ray

        fn = self._fns.get(key)
        if fn is None:
            fn = self._fns[key] = ray.get(fn_box[0])
        return fn(job)

    def hosted(self) -> int:
        """Episodes this worker holds now (also the no-op call the bench times)."""
        return len(self._envs)


_ACTOR: Any = None


def _actor_class() -> Any:
    global _ACTOR
    if _ACTOR is None:
        import ray

        _ACTOR = ray.remote(max_restarts=0, max_task_retries=0)(EnvWorker)
    return _ACTOR


def _cluster_messages_to_stderr() -> None:
    """Send the cluster's messages to this process's stderr, never its stdout.

    Ray's driver prints cluster errors ("(raylet) The node with node id ... has been marked
    dead") to ``sys.stdout`` from a background thread, ``log_to_driver=False`` or not; on a
    command whose stdout is a JSON report (``--json``) a lost node made the report
    unparseable. The thread looks ``print_to_stdstream`` up in its module on each message,
    so a wrapper there that marks every batch as an error routes it to stderr."""
    try:
        from ray._private import worker as w
    except ImportError:  # pragma: no cover - another Ray layout: its messages stay as they are
        return
    orig = getattr(w, "print_to_stdstream", None)
    if orig is None or getattr(orig, "_ceiling_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        orig({**data, "is_err": True}, ignore_prefix)

    to_stderr._ceiling_stderr = True  # type: ignore[attr-defined]
    w.print_to_stdstream = to_stderr


def connect(address: str | None) -> None:
    """Join the cluster at ``address`` (or start a one-node Ray here when None), once per
    process; a process already connected keeps its connection. The cluster's messages go
    to stderr (stdout stays the command's own)."""
    import ray

    _cluster_messages_to_stderr()
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                          "logging_level": "warning", "configure_logging": False}
    try:
        if address is None:
            n = os.cpu_count() or 1
            ray.init(num_cpus=n, resources={RESOURCE: n}, **kw)
        else:
            ray.init(address=address, **kw)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ConfigError(f"cannot connect to the Ray cluster at {address!r}: {e}",
                          where="--ray-address / CEILING_RAY_ADDRESS",
                          fix="start it with `ray start --head` (then use auto) or pass the "
                              "HOST:PORT it printed") from None


@dataclass
class _Slot:
    actor: Any
    node: str
    alive: bool = True
    load: int = 0
    # what the driver knows this worker holds: boxed references are sent only when missing
    # (a reference inside an argument makes the call a borrower: extra round trips)
    cards: OrderedDict[str, None] = field(default_factory=OrderedDict)
    cfgs: set[str] = field(default_factory=set)


@dataclass
class _Pool:
    slots: list[_Slot] = field(default_factory=list)
    card_refs: OrderedDict[str, Any] = field(default_factory=OrderedDict)  # content id -> ref

    def alive(self) -> list[_Slot]:
        return [s for s in self.slots if s.alive]


_POOLS: dict[str, _Pool] = {}


def _pool_key() -> str:
    import ray

    ctx = ray.get_runtime_context()
    return f"{ctx.gcs_address}|{ctx.get_job_id()}"


def _wanted(nodes: list[dict[str, Any]]) -> tuple[dict[str, int], bool]:
    """Workers wanted per alive node, and whether they hold the custom resource."""
    custom = any(n["Resources"].get(RESOURCE, 0) >= 1 for n in nodes if n.get("Alive"))
    key = RESOURCE if custom else "CPU"
    return {n["NodeID"]: int(n["Resources"].get(key, 0)) for n in nodes
            if n.get("Alive") and n["Resources"].get(key, 0) >= 1}, custom


def _is_lost(e: BaseException) -> bool:
    from ray import exceptions as rex

    if isinstance(e, rex.RayTaskError):
        return False
    return isinstance(e, rex.RayError)


class RayExecutor:
    """Environment steps on Ray worker actors (see the module docstring)."""

    name = "ray"

    def __init__(self, address: str | None = None, *, concurrency: int = 32,
                 straggler_grace_s: float = 120.0) -> None:
        self.address = address
        self.concurrency = concurrency
        self.straggler_grace_s = straggler_grace_s
        self._pool: _Pool | None = None
        self._where: dict[str, _Slot] = {}  # episode id -> its worker
        self._deadline: dict[str, float] = {}
        self._cfg_key = ""
        self._cfg_ref: Any = None
        self._closing: list[Any] = []
        self.lost_workers = 0
        self.stragglers = 0
        self.retried = 0  # map jobs re-run after their worker died
        self.call_overhead_s = 0.0  # Ray's share: card puts + lone calls' round trip - work
        self.timed_calls = 0
        self.placed: dict[str, int] = {}  # node id -> episodes started there (this run)

    # ------------------------------------------------------------------ workers
    def _spawn(self) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        assert self._pool is not None
        want, custom = _wanted(ray.nodes())
        have: dict[str, int] = {}
        for s in self._pool.alive():
            have[s.node] = have.get(s.node, 0) + 1
        cls = _actor_class()
        for node, n in want.items():
            for _ in range(n - have.get(node, 0)):
                opts: dict[str, Any] = {
                    "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False),
                    "max_concurrency": WORKER_THREADS}
                if custom:
                    opts |= {"num_cpus": 0, "resources": {RESOURCE: 1}}
                else:
                    opts |= {"num_cpus": 1}
                self._pool.slots.append(_Slot(cls.options(**opts).remote(), node))

    def open(self, cfg: EnvConfig) -> None:
        import ray

        connect(self.address)
        key = _pool_key()
        self._pool = _POOLS.setdefault(key, _Pool())
        self._spawn()
        if not self._pool.alive():
            raise ConfigError("the Ray cluster offers no environment workers (no alive node "
                              f"has a {RESOURCE!r} resource or a CPU)",
                              where="--executor ray",
                              fix="start worker nodes with `ray start --address HEAD:PORT "
                                  f"--resources '{{\"{RESOURCE}\": N}}'`")
        try:
            self._cfg_ref = ray.put(cfg)
        except Exception as e:  # noqa: BLE001 - an unpicklable env_factory
            raise ConfigError(f"the environment settings cannot be sent to Ray workers: "
                              f"{type(e).__name__}: {e}", where="env_factory",
                              fix="use a module-level, picklable env_factory") from None
        self._cfg_key = self._cfg_ref.hex()

    def capacity(self) -> int | None:
        return None

    def noop_rtt_s(self, n: int = 50) -> float:
        """Mean round trip of a no-op call to the first live worker, one at a time (what
        one Ray call costs here, now)."""
        import ray

        slot = self._pick()
        ray.get(slot.actor.hosted.remote())
        t = time.monotonic()
        for _ in range(n):
            ray.get(slot.actor.hosted.remote())
        return (time.monotonic() - t) / n

    def workers(self) -> int:
        return len(self._pool.alive()) if self._pool else 0

    def _pick(self) -> _Slot:
        assert self._pool is not None
        alive = self._pool.alive()
        if not alive:
            self._spawn()
            alive = self._pool.alive()
        if not alive:
            raise ConfigError("every Ray environment worker is gone (their nodes died)",
                              where="--executor ray",
                              fix="add worker nodes and resume the run with the same --out")
        return min(alive, key=lambda s: s.load)

    def _dead(self, slot: _Slot) -> None:
        if slot.alive:
            slot.alive = False
            self.lost_workers += 1

    def _card_ref(self, card: TaskCard) -> tuple[str, Any]:
        import ray

        assert self._pool is not None
        cid = card.content_id()
        refs = self._pool.card_refs  # kept between runs: a card is put once per process
        ref = refs.get(cid)
        if ref is None:
            t = time.monotonic()
            ref = refs[cid] = ray.put(card)
            self.call_overhead_s += time.monotonic() - t
            while len(refs) > CARD_REFS:
                refs.popitem(last=False)
        else:
            refs.move_to_end(cid)
        return cid, ref

    # ------------------------------------------------------------------ calls
    def _gather(self, calls: list[tuple[str, Any]], deadline: dict[str, float],
                t_submit: float) -> list[Result]:
        """Wait for every call; one whose episode passed its deadline is a straggler. A
        lone call adds its round trip minus the worker's own time to ``call_overhead_s``."""
        import ray

        pending = {ref: eid for eid, ref in calls}
        if len(calls) == 1:  # one call: a plain get (a wait first costs another round trip)
            (eid, ref), = calls
            due = deadline.get(eid, math.inf)
            try:
                ray.get(ref, timeout=None if due == math.inf
                        else max(0.0, due - time.monotonic()))
            except ray.exceptions.GetTimeoutError:
                self._straggle(eid)
            except ray.exceptions.RayError:
                pass  # classified below
            pending = {}
        while pending:
            due = min((deadline.get(e, math.inf) for e in pending.values()), default=math.inf)
            timeout = None if due == math.inf else max(0.0, due - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=timeout)
            for r in ready:
                pending.pop(r)
            now = time.monotonic()
            for r, e in list(pending.items()):
                if deadline.get(e, math.inf) <= now:
                    self._straggle(e)
                    pending.pop(r)
        out: list[Result] = []
        for eid, ref in calls:
            slot = self._where.get(eid)
            if slot is None:
                out.append(Straggler(self.straggler_grace_s))
                continue
            try:
                val = ray.get(ref)
                out.append(Ok(val))
                if len(calls) == 1:  # what Ray added: the round trip minus the work
                    work = val if isinstance(val, float) else float(val[-1])
                    self.call_overhead_s += time.monotonic() - t_submit - work
                    self.timed_calls += 1
            except Exception as e:  # noqa: BLE001 - classified below
                if _is_lost(e):
                    self._dead(slot)
                    out.append(Lost(f"{type(e).__name__}: {str(e).splitlines()[0]}"))
                else:
                    cause = getattr(e, "cause", None)
                    out.append(Failed(cause if isinstance(cause, BaseException) else e))
        for eid, res in zip([e for e, _ in calls], out, strict=True):
            if isinstance(res, Lost):
                self._release(eid)
        return out

    def _straggle(self, eid: str) -> None:
        import ray

        slot = self._where.pop(eid, None)
        self._deadline.pop(eid, None)
        if slot is None:
            return
        self.stragglers += 1
        slot.load -= 1
        self._dead(slot)
        ray.kill(slot.actor, no_restart=True)

    def _release(self, eid: str) -> None:
        slot = self._where.pop(eid, None)
        self._deadline.pop(eid, None)
        if slot is not None:
            slot.load -= 1

    def start(self, items: Sequence[StartItem]) -> list[Result]:
        calls: list[tuple[str, Any]] = []
        sent: list[tuple[_Slot, str]] = []
        t_submit = time.monotonic()
        for eid, card, seed in items:
            slot = self._pick()
            slot.load += 1
            self._where[eid] = slot
            self.placed[slot.node] = self.placed.get(slot.node, 0) + 1
            b = card.budget
            self._deadline[eid] = time.monotonic() + b.episode_timeout_s + \
                b.command_timeout_s + self.straggler_grace_s
            cid, ref = self._card_ref(card)
            # omit a box only once an earlier start on this worker came back (calls of one
            # batch run concurrently there)
            card_box = None if cid in slot.cards else [ref]
            cfg_box = None if self._cfg_key in slot.cfgs else [self._cfg_ref]
            sent.append((slot, cid))
            calls.append((eid, slot.actor.start.remote(eid, cid, card_box, self._cfg_key,
                                                       cfg_box, seed)))
        out = self._gather(calls, self._deadline, t_submit)
        for (slot, cid), res in zip(sent, out, strict=True):
            if isinstance(res, Ok):
                slot.cards[cid] = None
                slot.cards.move_to_end(cid)
                while len(slot.cards) > CARD_CACHE // 2:  # the worker keeps CARD_CACHE
                    slot.cards.popitem(last=False)
                slot.cfgs.add(self._cfg_key)
        return out

    def step(self, items: Sequence[StepItem]) -> list[Result]:
        calls: list[tuple[str, Any]] = []
        dead: dict[str, Result] = {}
        t_submit = time.monotonic()
        for eid, action in items:
            slot = self._where.get(eid)
            if slot is None or not slot.alive:
                self._release(eid)
                dead[eid] = Lost("its worker died earlier in this round")
                continue
            calls.append((eid, slot.actor.step.remote(eid, action)))
        got = dict(zip([e for e, _ in calls], self._gather(calls, self._deadline, t_submit),
                       strict=True))
        return [dead[eid] if eid in dead else got[eid] for eid, _ in items]

    def close(self, eid: str) -> None:
        slot = self._where.pop(eid, None)
        self._deadline.pop(eid, None)
        if slot is None:
            return
        slot.load -= 1
        if slot.alive:
            self._closing.append(slot.actor.close.remote(eid))

    def map(self, fn: Callable[[Any], T], jobs: Sequence[Any],
            progress: Callable[[int], None] | None = None) -> list[T]:
        """``fn`` over ``jobs`` on the workers (one job per worker at a time), results in job
        order. A job lost with its worker runs again on another (``fn`` must be a pure
        function of its job), at most ``MAP_RETRIES`` times."""
        import ray

        connect(self.address)
        self._pool = _POOLS.setdefault(_pool_key(), _Pool())
        self._spawn()
        fn_ref = ray.put(fn)
        key = fn_ref.hex()
        results: list[Any] = [None] * len(jobs)
        tries = [0] * len(jobs)
        todo = deque(range(len(jobs)))
        inflight: dict[Any, tuple[int, _Slot]] = {}
        while todo or inflight:
            while todo and len(inflight) < max(1, self.workers()):
                i = todo.popleft()
                slot = self._pick()
                slot.load += 1
                inflight[slot.actor.run.remote(key, [fn_ref], jobs[i])] = (i, slot)
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                i, slot = inflight.pop(ref)
                slot.load -= 1
                try:
                    results[i] = ray.get(ref)
                except ray.exceptions.RayError as e:
                    if not _is_lost(e):
                        cause = getattr(e, "cause", None)
                        raise cause if isinstance(cause, BaseException) else e from None
                    self._dead(slot)
                    tries[i] += 1
                    if tries[i] > MAP_RETRIES:
                        raise RuntimeError(f"job {i} was lost with its worker {tries[i]} "
                                           f"times ({type(e).__name__})") from None
                    self.retried += 1
                    todo.appendleft(i)
                    continue
                if progress is not None:
                    progress(1)
        return results

    def shutdown(self) -> None:
        import ray

        for eid in list(self._where):
            self.close(eid)
        for ref in self._closing:
            try:
                ray.get(ref, timeout=60)
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass
        self._closing = []


