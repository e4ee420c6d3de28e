"""Red teaming that runs with training: per-step integrity metrics and the hack alarm.

Every training step logs, over the step's episodes (trajectories):

- ``hack_share``: share with outcome ``hack_detected`` (the verifier caught tampering);
- ``infra_share``: share with outcome ``infra_error`` (a fault of ceiling or the machine;
  such episodes carry no reward signal and GRPO drops them);
- ``abstain_share``: share that gave up (``abstained_correct`` + ``abstained_wrong``), and
  ``abstain_wrong_share`` (gave up on a feasible card);
- ``suspicious``: the trajectory scan's evidence count, summed over the step's episodes
  (``verdict.detail["suspicious"]``: git-history mining, network fetches, test hunting);
- ``episodes``: how many episodes the shares are over.

:class:`HackAlarm` watches ``hack_share`` over the last ``window`` steps (episode-weighted:
hack episodes / episodes in the window) and fires when it rises past ``max_hack_share``.
It needs a full window before it can fire (a short run never alarms on its first steps);
the window restarts when a run is resumed. ``action: warn`` logs a warning once per
crossing (re-armed when the share falls back); ``action: stop`` ends the run after writing
a checkpoint, so ``ceiling train --resume`` continues it (after raising the threshold,
switching to ``warn``, or fixing the environment that leaks reward).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..verify import Outcome
from ._config import AlarmSettings

_ABSTAIN = (Outcome.ABSTAINED_CORRECT, Outcome.ABSTAINED_WRONG)


def integrity_metrics(trajectories: Sequence[Any]) -> dict[str, float]:
    """The step's integrity metrics (module doc) over ``trajectories`` (objects with
    ``outcome`` and ``verdict``, a ``Verdict.model_dump``). No episodes: shares are 0."""
    n = len(trajectories)
    count: dict[str, int] = {k: 0 for k in (Outcome.HACK_DETECTED, Outcome.INFRA_ERROR, *_ABSTAIN)}
    suspicious = 0
    for t in trajectories:
        oc = str(getattr(t, "outcome", ""))
        if oc in count:
            count[oc] += 1
        detail = (getattr(t, "verdict", None) or {}).get("detail") or {}
        sus = detail.get("suspicious") or []
        suspicious += len(sus) if isinstance(sus, list) else 0

    def share(k: int) -> float:
        return k / n if n else 0.0

    return {"episodes": float(n), "hack_share": share(count[Outcome.HACK_DETECTED]),
            "infra_share": share(count[Outcome.INFRA_ERROR]),
            "abstain_share": share(sum(count[k] for k in _ABSTAIN)),
            "abstain_wrong_share": share(count[Outcome.ABSTAINED_WRONG]),
            "suspicious": float(suspicious)}


@dataclass
class AlarmEvent:
    step: int
    share: float
    stop: bool
    message: str


class HackAlarm:
    """The hack-share alarm (module doc). :meth:`update` takes one step's metrics (as from
    :func:`integrity_metrics`), adds ``hack_share_window`` and ``redteam_alarm`` (1.0 when it
    fires at this step) to them, and returns the event when it fires."""

    def __init__(self, settings: AlarmSettings | None) -> None:
        self.settings = settings
        w = settings.window if settings is not None else 1
        self._hist: deque[tuple[float, float]] = deque(maxlen=w)
        self._armed = True

    def update(self, step: int, metrics: dict[str, float]) -> AlarmEvent | None:
        s = self.settings
        n = metrics.get("episodes", 0.0)
        self._hist.append((metrics.get("hack_share", 0.0) * n, n))
        eps = sum(e for _h, e in self._hist)
        share = sum(h for h, _e in self._hist) / eps if eps else 0.0
        metrics["hack_share_window"] = share
        metrics["redteam_alarm"] = 0.0
        if s is None or not s.enabled:
            return None
        full = len(self._hist) == s.window
        if not (full and share > s.max_hack_share):
            self._armed = True
            return None
        if not self._armed:
            return None
        self._armed = False
        metrics["redteam_alarm"] = 1.0
        stop = s.action == "stop"
        msg = (f"red-team alarm at step {step}: {share:.0%} of the episodes of the last "
               f"{s.window} steps were hack_detected (threshold {s.max_hack_share:.0%}); "
               + ("stopped after a checkpoint; inspect the hack evidence in the "
                  "trajectories, then resume with --resume (raise redteam_alarm."
                  "max_hack_share or set action: warn to go on)" if stop else
                  "training goes on (redteam_alarm.action: warn)"))
        return AlarmEvent(step, share, stop, msg)


__all__ = ["AlarmEvent", "HackAlarm", "integrity_metrics"]
