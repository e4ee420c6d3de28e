"""Scripted policies: team env's Plans (oracle, null, random, exploits) as text policies.

A Plan picks an :class:`~ceiling.tools.Action` from the card and the history; this policy
renders it as reply text in the harness's own format (``context["format_reply"]``), so a
scripted run goes through exactly the parser a model's reply does. One Plan instance is
kept per episode (``context["episode_id"]``) so stateful plans stay replayable; the random
plan is seeded from the episode seed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import PolicyError, nearest
from ..tools import Action, Plan
from ._types import Generation, PolicyRequest, SamplingParams

PlanFactory = Callable[[int], Plan]  # episode seed -> a fresh plan


def plan_factory(name: str) -> PlanFactory:
    """``oracle`` | ``null`` | ``random`` | ``exploit:NAME`` -> a factory of fresh Plans."""
    from ..verify import null_plan, oracle_plan, random_plan

    if name in ("oracle", "null"):
        fn = oracle_plan if name == "oracle" else null_plan
        return lambda _seed: fn()
    if name == "random":
        return lambda seed: random_plan(seed)
    if name.startswith("exploit:"):
        key = name.split(":", 1)[1]
        from ..verify.exploits import EXPLOITS

        if key not in EXPLOITS:
            hint = nearest(key, list(EXPLOITS))
            raise PolicyError(f"unknown exploit {key!r}",
                              fix=f"did you mean 'scripted:exploit:{hint}'?" if hint else
                              f"use one of {sorted(EXPLOITS)}")
        plan = EXPLOITS[key]
        return lambda _seed: _fresh(plan)
    hint = nearest(name, ["oracle", "null", "random"])
    raise PolicyError(f"unknown scripted policy {name!r}",
                      fix=f"did you mean 'scripted:{hint}'?" if hint else
                      "use scripted:oracle, scripted:null, scripted:random or "
                      "scripted:exploit:NAME")


def _fresh(plan: Any) -> Plan:
    """A per-episode copy when the exploit is stateful (has a ``fresh``/``copy`` hook)."""
    for hook in ("fresh", "copy"):
        fn = getattr(plan, hook, None)
        if callable(fn):
            return fn()  # type: ignore[no-any-return]
    return plan  # type: ignore[no-any-return]


class ScriptedPolicy:
    """A text policy backed by Plans. ``generate`` never raises for one request: a Plan
    that fails yields ``Generation(error=...)`` (the episode becomes infra_error)."""

    def __init__(self, factory: PlanFactory, spec: str) -> None:
        self.spec = spec
        self._factory = factory
        self._plans: dict[str, Plan] = {}

    def _plan(self, ctx: dict[str, Any]) -> Plan:
        key = str(ctx.get("episode_id", id(ctx)))
        if key not in self._plans:
            self._plans[key] = self._factory(int(ctx.get("seed", 0)))
        return self._plans[key]

    def end_episode(self, episode_id: str) -> None:
        """Forget an episode's plan (the runner calls this when an episode ends)."""
        self._plans.pop(episode_id, None)

    def generate(self, requests: Sequence[PolicyRequest],
                 sampling: SamplingParams) -> list[Generation]:
        out = []
        for req in requests:
            ctx = req.context
            try:
                card = ctx["card"]
                plan = self._plan(ctx)
                action = Action.parse_obj(plan.next_action(card, list(ctx.get("history", []))))
                fmt = ctx.get("format_reply")
                text = fmt(action) if callable(fmt) else json.dumps(
                    {"tool": action.tool, "args": action.args})
                out.append(Generation(text=text))
            except Exception as e:  # noqa: BLE001 - becomes Generation(error=...)
                out.append(Generation(text="", finish_reason="error",
                                      error=f"scripted policy failed: {type(e).__name__}: {e}"))
        return out
