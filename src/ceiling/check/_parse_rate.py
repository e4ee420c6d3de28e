"""Which harness format does a model follow? The share of its turns that parse, per format.

:func:`parse_rates` plays the same cards with the same policy under each format named
(real episodes, real sandboxes, the policy's own sampling) and counts, per format, the turns
whose reply parsed into a tool call, the valid actions among them (parsed, and the
environment did not reject the call as an unknown tool or bad arguments), and the episodes
solved. Each card's step budget is capped at ``turns`` so an untrained model that never
finishes costs a bounded time. ``ceiling bench harness`` prints the result as JSON, with
each format's parse rate as a ratio to the first format's (the same-run baseline).
``few_shot="both"`` plays each chat format twice, without and with the harness's worked
example (``bash`` and ``bash+example``), so the example's effect is read in one run.

Limits: a parse rate measures the format, not the skill; with few cards its interval is
wide (a Wilson 95 % interval is reported beside each rate).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any


def wilson(hits: int, n: int, z: float = 1.96) -> list[float] | None:
    """The Wilson score interval of ``hits / n`` (None when ``n`` is 0)."""
    if n == 0:
        return None
    p = hits / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [round(max(0.0, c - h), 4), round(min(1.0, c + h), 4)]


def _capped(cards: Sequence[Any], turns: int) -> list[Any]:
    """Shallow copies of ``cards`` whose step budget is at most ``turns``."""
    return [c.model_copy(update={"budget": c.budget.model_copy(
        update={"max_steps": min(c.budget.max_steps, turns)})}) for c in cards]


def tally(trajectories: Sequence[Any], cards: Sequence[Any] = ()) -> dict[str, Any]:
    """Turns, parsed turns, valid actions (parsed, and the card's tool table accepts the
    arguments) and solved episodes of a list of trajectories."""
    from ..tools import card_tools, check_args

    tables = {c.id: card_tools(c) for c in cards}
    turns = parsed = valid = 0
    for t in trajectories:
        for u in t.turns:
            if u.text == "" and u.action is None and u.parse_error is None:
                continue  # an infra failure before any reply
            turns += 1
            if u.parse_error is None and u.action is not None:
                parsed += 1
                table = tables.get(t.card_id)
                if table is None or check_args(u.action["tool"], u.action.get("args", {}),
                                               table) is None:
                    valid += 1
    eps = [t for t in trajectories if t.outcome != "infra_error"]
    solved = sum(1 for t in eps if t.passed)
    return {"turns": turns, "parsed": parsed,
            "parse_rate": round(parsed / turns, 4) if turns else None,
            "parse_rate_ci": wilson(parsed, turns), "valid_actions": valid,
            "episodes": len(eps), "solved": solved,
            "infra_errors": len(trajectories) - len(eps)}


def parse_rates(policy_spec: str, cards: Sequence[Any], formats: Sequence[str], *,
                turns: int = 4, k: int = 1, temperature: float | None = None,
                top_p: float | None = None, max_new_tokens: int = 128, seed: int = 0,
                backend: str = "namespace", workers: int = 2,
                few_shot: str = "auto") -> dict[str, Any]:
    """Play ``cards`` under each format; returns ``{"formats": {FMT: tally + seconds},
    "ratio_to_first": {FMT: parse-rate ratio}, ...}``. ``few_shot``: ``auto`` (each
    format's default), ``on``, ``off`` or ``both`` (chat formats twice, keyed ``FMT`` and
    ``FMT+example``)."""
    from .._errors import ConfigError
    from ..harness import FORMATS, HarnessConfig
    from ..policies import load_policy, sampling_params
    from ..rollout import run_episodes

    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ConfigError(f"unknown harness format(s) {bad}", where="--formats",
                          fix="a comma-separated list of " + ", ".join(FORMATS))
    if few_shot not in ("auto", "on", "off", "both"):
        raise ConfigError(f"unknown few-shot setting {few_shot!r}", where="--few-shot",
                          fix="use auto, on, off or both")
    plays: list[tuple[str, HarnessConfig]] = []
    for fmt in formats:
        if fmt == "line" or few_shot == "auto":
            plays.append((fmt, HarnessConfig(format=fmt)))  # type: ignore[arg-type]
        elif few_shot == "both":
            plays += [(fmt, HarnessConfig(format=fmt, few_shot=False)),  # type: ignore[arg-type]
                      (f"{fmt}+example", HarnessConfig(format=fmt, few_shot=True))]  # type: ignore[arg-type]
        else:
            plays.append((fmt, HarnessConfig(format=fmt,  # type: ignore[arg-type]
                                             few_shot=few_shot == "on")))
    pol = load_policy(policy_spec)
    capped = _capped(cards, turns)
    out: dict[str, Any] = {}
    for fmt, h in plays:
        sp = sampling_params(temperature=temperature, top_p=top_p,
                             max_new_tokens=max_new_tokens, seed=seed)
        t0 = time.perf_counter()
        trajs = run_episodes(capped, pol, h, k=k, sampling=sp, backend=backend, seed=seed,
                             workers=workers, progress=False)
        out[fmt] = {**tally(trajs, capped), "few_shot": h.shows_example,
                    "seconds": round(time.perf_counter() - t0, 1)}
    first = plays[0][0]
    base = out[first]["parse_rate"]
    ratio = {f: (round(v["parse_rate"] / base, 3) if base and v["parse_rate"] is not None
                 else None) for f, v in out.items()}
    return {"policy": policy_spec, "cards": len(cards), "k": k, "turns_per_episode": turns,
            "sampling": {"temperature": temperature if temperature is not None else 1.0,
                         "top_p": top_p if top_p is not None else 1.0,
                         "max_new_tokens": max_new_tokens},
            "formats": out, "baseline": first, "ratio_to_first": ratio}


__all__ = ["parse_rates", "tally", "wilson"]
