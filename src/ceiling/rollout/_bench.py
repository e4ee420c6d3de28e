"""``ceiling bench rollout``: where a rollout's wall time goes, with a scripted policy.

Measures, in one run and on the same machine:

- the harness's cost per step (render the prompt + parse the reply) on real dialogues,
  next to a bare sandbox ``exec("true")`` measured in the same run (ratio);
- the environment's cost per step (``TaskEnv.step`` without the final verification) and
  the verifier's time per episode, at the first level and at every level (contention);
- episodes/s at several concurrency levels (default 1, 4, 16 live episodes) over the same
  cards, with the speed-up against concurrency 1;
- the share of wall time spent outside the policy (scripted, so nearly all of it: this is
  the runner's own overhead budget a model policy has to hide behind);
- with ``ray`` (:func:`ray_rows`): the same cards on the local executor and on the Ray
  executor over a real cluster started on this machine (``ray.cluster_utils.Cluster``: a
  head without env slots plus 1, then 2 worker nodes of one slot each), in the same run:
  Ray's per-episode overhead with one episode at a time (card puts plus each call's round
  trip minus the worker's own time; target <= 20 ms) next to the plain wall difference,
  episodes/s at ``ray_concurrency`` live episodes on 1 and 2 nodes, the 1 -> 2 node scaling
  efficiency (rate2 / (2 * rate1); the nodes share this machine's cores, so it says what
  the executor costs, not what real machines gain) and whether every executor gave the
  same per-card outcomes and rewards. Workers are started by a warm-up run before timing;
  ``ray_start_s`` is the cluster start.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

from .._errors import ConfigError
from ..cards import TaskCard
from ..harness import Harness, HarnessConfig
from ..policies import load_policy
from ..verify import Outcome
from ._runner import RunStats, run_episodes
from ._types import Trajectory

DEMO_TEMPLATES = ("terminal_ops/demo-create-v1", "terminal_ops/demo-append-v1",
                  "terminal_ops/demo-copy-v1", "terminal_ops/demo-count-v1")


def bench_cards(n: int) -> list[TaskCard]:
    """``n`` small terminal_ops cards (the demo templates, distinct seeds)."""
    from ..envs import make

    return [make(DEMO_TEMPLATES[i % len(DEMO_TEMPLATES)], seed=1000 + i) for i in range(n)]


def _harness_per_step_s(cards: Sequence[TaskCard], fmt: str, reps: int = 200) -> float:
    """Mean seconds to render a prompt and parse a reply, on dialogues of ~6 turns."""
    h = Harness(HarnessConfig(format=fmt))  # type: ignore[arg-type]
    from ..tools import Action

    acts = [Action("run", {"cmd": "ls -la"}), Action("read", {"path": "notes.txt"}),
            Action("write", {"path": "a.txt", "content": "x\ny\n"})]
    dialogues = []
    for c in cards[:4]:
        d = h.start(c)
        for i in range(6):
            a = acts[i % len(acts)]
            d.add(d.format_reply(a), a, "line\n" * 20)
        dialogues.append(d)
    replies = [d.format_reply(acts[0]) for d in dialogues]
    t = time.perf_counter()
    for _ in range(reps):
        for d, r in zip(dialogues, replies, strict=True):
            d.request()
            d.parse(r)
    return (time.perf_counter() - t) / (reps * len(dialogues))


def _bare_exec_s(backend: str, reps: int = 20) -> float:
    from ..sandbox import open_sandbox

    with open_sandbox([{}], backend=backend) as sb:
        sb.exec("true")
        t = time.perf_counter()
        for _ in range(reps):
            sb.exec("true")
        return (time.perf_counter() - t) / reps


def _run(cards: Sequence[TaskCard], fmt: str, backend: str, policy_spec: str, *,
         concurrency: int, executor: Any = "local") -> tuple[list[Trajectory], RunStats]:
    st = RunStats()
    trajs = run_episodes(cards, load_policy(policy_spec), HarnessConfig(format=fmt),  # type: ignore[arg-type]
                         backend=backend, concurrency=concurrency, workers=concurrency,
                         progress=False, stats=st, seed=0, executor=executor)
    return trajs, st


def _row(trajs: Sequence[Trajectory], st: RunStats, concurrency: int) -> dict[str, Any]:
    n = len(trajs)
    return {"episodes": n, "concurrency": concurrency, "wall_s": round(st.wall_s, 3),
            "episodes_per_s": round(n / st.wall_s, 3) if st.wall_s else None,
            "ms_per_episode": round(st.wall_s / n * 1e3, 2) if n else None,
            "passed": sum(t.passed for t in trajs), "retried": st.retried,
            "infra_errors": sum(t.outcome == Outcome.INFRA_ERROR for t in trajs)}


def ray_rows(cards: Sequence[TaskCard], *, backend: str, fmt: str, policy_spec: str,
             concurrency: int = 4) -> dict[str, Any]:
    """Local vs Ray on 1 and 2 nodes of a cluster started here (see the module docstring)."""
    import ray
    from ray.cluster_utils import Cluster

    from ._ray import RESOURCE, RayExecutor

    if ray.is_initialized():
        raise ConfigError("bench rollout starts its own Ray cluster, but this process is "
                          "already connected to one", where="--ray",
                          fix="run the bench in a fresh process, or pass --no-ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    node: dict[str, Any] = {"num_cpus": 1, "resources": {RESOURCE: 1}}
    t = time.perf_counter()
    cluster = Cluster(initialize_head=True, connect=True,
                      head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        start_s = time.perf_counter() - t
        warm = list(cards[:2])

        def on_ray(conc: int) -> tuple[list[Trajectory], RunStats, RayExecutor]:
            _run(warm, fmt, backend, policy_spec, concurrency=2,
                 executor=RayExecutor(cluster.address))  # every node's workers are up
            ex = RayExecutor(cluster.address)
            return (*_run(cards, fmt, backend, policy_spec, concurrency=conc, executor=ex), ex)

        # one episode at a time, twice each, interleaved; the faster of each pair counts
        seq = [(_run(cards, fmt, backend, policy_spec, concurrency=1), on_ray(1))
               for _ in range(2)]
        local_seq = min((x[0] for x in seq), key=lambda r: r[1].wall_s)
        ray_seq = min((x[1] for x in seq), key=lambda r: r[1].wall_s)[:2]
        call_ms = min(x[1][2].call_overhead_s for x in seq) / len(cards) * 1e3
        calls_per_episode = seq[0][1][2].timed_calls / len(cards)
        rtt_ms = seq[0][1][2].noop_rtt_s() * 1e3
        local_c = _run(cards, fmt, backend, policy_spec, concurrency=concurrency)
        ray1 = on_ray(concurrency)[:2]
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        ray2 = on_ray(concurrency)[:2]
    finally:
        ray.shutdown()
        cluster.shutdown()
    n = len(cards)
    wall_ms = (ray_seq[1].wall_s - local_seq[1].wall_s) / n * 1e3
    r1, r2 = n / ray1[1].wall_s, n / ray2[1].wall_s

    def key(trajs: Sequence[Trajectory]) -> list[tuple[str, str, float]]:
        return [(x.episode_id, x.outcome, x.reward) for x in trajs]

    same = all(key(x[0]) == key(local_seq[0]) for x in (ray_seq, local_c, ray1, ray2))
    return {
        "ray_start_s": round(start_s, 2),
        "rows": {"local_1": _row(*local_seq, 1), "ray_1_node_1": _row(*ray_seq, 1),
                 f"local_{concurrency}": _row(*local_c, concurrency),
                 f"ray_1_node_{concurrency}": _row(*ray1, concurrency),
                 f"ray_2_nodes_{concurrency}": _row(*ray2, concurrency)},
        "ray_overhead_ms_per_episode": round(call_ms, 2),
        "overhead_target_ms": 20.0, "overhead_within_target": call_ms <= 20.0,
        "wall_overhead_ms_per_episode": round(wall_ms, 2),
        "calls_per_episode": round(calls_per_episode, 2),
        "noop_call_rtt_ms": round(rtt_ms, 3),
        "ray_vs_local_rate": round(r1 / (n / local_c[1].wall_s), 3),
        "scaling_1_to_2_nodes": {"episodes_per_s_1": round(r1, 3),
                                 "episodes_per_s_2": round(r2, 3),
                                 "efficiency": round(r2 / (2 * r1), 3)},
        "same_outcomes_and_rewards": same,
        "note": "ray_overhead: what Ray adds per episode, one episode at a time: card puts (once "
                "per card and process) "
                "plus each call's round trip minus the worker's own time (load-robust); "
                "wall_overhead: (ray - local wall) / episodes, faster of two interleaved "
                "runs each (includes load noise); noop_call_rtt_ms: one empty Ray call now "
                "(the floor each of calls_per_episode pays); scaling at "
                f"{concurrency} live episodes; nodes share this machine's "
                f"{os.cpu_count()} cores",
    }


def run_bench(*, n_cards: int = 16, levels: Sequence[int] = (1, 4, 16),
              backend: str = "namespace", fmt: str = "line", workers: int | None = None,
              policy_spec: str = "scripted:oracle", progress: bool = False,
              ray: bool = False, ray_concurrency: int = 4) -> dict[str, Any]:
    """The benchmark report (a JSON-able dict); ``ray`` adds the executor rows."""
    cards = bench_cards(n_cards)
    harness_s = _harness_per_step_s(cards, fmt)
    bare_s = _bare_exec_s(backend)
    per_level: dict[str, Any] = {}
    base_rate = None
    first: dict[str, float] = {}
    for level in levels:
        st = RunStats()
        trajs = run_episodes(cards, load_policy(policy_spec), HarnessConfig(format=fmt),  # type: ignore[arg-type]
                             backend=backend, concurrency=level,
                             workers=workers or max(1, level), progress=progress, stats=st,
                             seed=0)
        rate = len(trajs) / st.wall_s if st.wall_s > 0 else 0.0
        base_rate = base_rate or rate
        passed = sum(t.passed for t in trajs)
        # the last step of an episode includes grading: keep it out of the step cost
        env_steps = [x.env_s for t in trajs for x in t.turns[:-1]]
        verify = [t.timings.get("verify_s", 0.0) for t in trajs]
        env_step_s = statistics.mean(env_steps) if env_steps else 0.0
        verify_s = statistics.mean(verify) if verify else 0.0
        first = first or {"env_step_s": env_step_s, "verify_s": verify_s}
        per_level[str(level)] = {
            "episodes": len(trajs), "passed": passed, "steps": st.steps, "rounds": st.rounds,
            "wall_s": round(st.wall_s, 3), "episodes_per_s": round(rate, 3),
            "speedup_vs_1": round(rate / base_rate, 3) if base_rate else None,
            "policy_s": round(st.policy_s, 4),
            "outside_policy_share": round(1 - st.policy_s / st.wall_s, 4) if st.wall_s else None,
            "infra_errors": sum(t.outcome == Outcome.INFRA_ERROR for t in trajs),
            "env_step_ms": round(env_step_s * 1e3, 3),
            "verify_ms_per_episode": round(verify_s * 1e3, 1),
        }
    env_step_s, verify_s = first.get("env_step_s", 0.0), first.get("verify_s", 0.0)
    executors = (ray_rows(cards, backend=backend, fmt=fmt, policy_spec=policy_spec,
                          concurrency=ray_concurrency) if ray else None)
    return {
        "bench": "rollout", "policy": policy_spec, "harness_format": fmt, "backend": backend,
        "cards": n_cards,
        "per_step": {
            "harness_ms": round(harness_s * 1e3, 4),
            "env_step_ms": round(env_step_s * 1e3, 3),
            "bare_exec_ms": round(bare_s * 1e3, 3),
            "harness_vs_bare_exec": round(harness_s / bare_s, 4) if bare_s else None,
            "env_step_vs_bare_exec": round(env_step_s / bare_s, 3) if bare_s else None,
        },
        "verify_ms_per_episode": round(verify_s * 1e3, 1),
        "note": "per_step and verify figures come from the first (lowest) concurrency level; "
                "each level reports its own under contention",
        "concurrency": per_level,
        **({"executors": executors} if executors is not None else {}),
        "baseline": "bare sandbox exec('true') in the same run; speed-ups against "
                    "concurrency 1 in the same run; executors: the local executor in the "
                    "same run",
    }
