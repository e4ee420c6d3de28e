"""Real rollouts for training: the live (adapter-wrapped) model as an ``hf`` policy, run
through the harness and ``ceiling.rollout.run_episodes`` in sandboxed episodes scored by the
verifier. Groups come back in card order, ``k`` trajectories each.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from ..cards import TaskCard
from ..rollout import Trajectory
from ..verify import RewardSpec
from ._optim import RolloutFn
from ._verdict_cache import VerdictCache, cached_env_factory


def pick_backend(want: str) -> tuple[str, str | None]:
    """``(backend, note)``: ``namespace`` when it works here, else ``local`` with a note
    saying so (the local backend does not isolate anything)."""
    if want == "local":
        return "local", None
    try:
        from ..sandbox import open_sandbox

        sb = open_sandbox([{}], backend="namespace")
        try:
            ok = sb.exec("true").exit_code == 0
        finally:
            sb.close()
        if ok:
            return "namespace", None
        why = "a test command failed"
    except Exception as e:  # noqa: BLE001 - any failure means: fall back, and say why
        why = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
    return "local", (f"namespace sandbox unavailable ({why}); using the local backend "
                     "(no isolation)")


def live_policy(model: Any, tok: Any, spec: str) -> Any:
    from ..policies import HFPolicy

    return HFPolicy(spec, model=model, tokenizer=tok, spec=spec)


def group_by_card(cards: Sequence[TaskCard], trajs: Sequence[Trajectory],
                  k: int) -> list[list[Trajectory]]:
    by: dict[str, list[Trajectory]] = {}
    for t in trajs:
        by.setdefault(t.card_id, []).append(t)
    out = []
    for c in cards:
        g = sorted(by.get(c.id, []), key=lambda t: t.sample)
        out.append(g)
    return out


def make_rollout(policy: Any, *, harness_format: str, temperature: float, max_new_tokens: int,
                 backend: str, workers: int, reward: RewardSpec,
                 cache: VerdictCache | None = None,
                 history_turns: int | None = None, top_p: float = 1.0,
                 executor: str = "local", ray_address: str | None = None) -> RolloutFn:
    """A :data:`RolloutFn` over ``policy`` with these settings. With ``cache``, identical
    episodes reuse one verdict (see :mod:`._verdict_cache`; local executor only: Ray
    workers are other processes). ``executor``: ``local`` or ``ray`` (generation stays
    here, environment steps go to the cluster's workers)."""
    if executor != "local":
        cache = None
    from ..harness import HarnessConfig
    from ..policies import SamplingParams
    from ..rollout import run_episodes

    harness = HarnessConfig(format=harness_format,  # type: ignore[arg-type]
                            max_reply_tokens=max_new_tokens, history_turns=history_turns)

    def rollout(cards: Sequence[TaskCard], k: int, seed: int) -> list[list[Trajectory]]:
        sampling = SamplingParams(temperature=temperature, top_p=top_p,
                                  max_new_tokens=max_new_tokens, stop=harness.stop_strings,
                                  seed=seed)
        # the same card may be drawn twice in one step: run each distinct card once with
        # k samples per draw
        uniq: dict[str, TaskCard] = {}
        for c in cards:
            uniq.setdefault(c.id, c)
        trajs = run_episodes(list(uniq.values()), policy, harness, k=k, sampling=sampling,
                             backend=backend, workers=workers, seed=seed, reward_spec=reward,
                             progress=False,
                             env_factory=cached_env_factory(cache) if cache else None,
                             executor=executor, ray_address=ray_address)
        return group_by_card(list(uniq.values()), trajs, k)

    return rollout


def warn(msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr)
