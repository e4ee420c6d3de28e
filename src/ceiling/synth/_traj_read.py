"""Reading trajectories for ``ceiling synth trajectories``: two JSONL formats, one shape.

1. **ceiling's JSONL** (:class:`ceiling.rollout.Trajectory`; ``ceiling eval --name N`` writes
   ``$CEILING_HOME/runs/name-N/trajectories.jsonl``): recognised by ``episode_id`` and ``turns``; each turn's ``action`` (``{"tool", "args"}``)
   and ``observation`` become a step.
2. **generic JSONL**: one trajectory per line::

       {"id": "t1", "instruction": "...", "outcome": "solved",          # both optional
        "steps": [{"tool": "run", "args": {"cmd": "mv a b"}, "output": "",
                   "files_read": {"a.txt": "..."}, "files_written": {"b.txt": "..."}},
                  ...]}

   ``tool`` is one of ``run``/``read``/``write``/``edit``/``submit``/``give_up`` with
   ceiling's argument names (``cmd``; ``path``; ``path, content``; ``path, old, new``);
   ``files_read``/``files_written`` (optional) carry file contents the log recorded
   around the step (read before it ran / as it left them).

A line that is neither is refused with its line number.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import ConfigError


@dataclass
class Step:
    tool: str
    args: dict[str, Any]
    output: str = ""
    files_read: dict[str, str] = field(default_factory=dict)
    files_written: dict[str, str] = field(default_factory=dict)


@dataclass
class Traj:
    id: str
    instruction: str
    steps: list[Step]
    outcome: str | None = None  # "solved", "failed", ... (None: unknown)
    card_id: str | None = None  # ceiling's JSONL: the card it came from
    type: str = "terminal_ops"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_.\-]+", "-", text.lower()).strip("-.")[:60] or "traj"


def _from_ceiling(d: dict[str, Any]) -> Traj:
    steps = []
    for t in d.get("turns") or []:
        act = t.get("action")
        if not isinstance(act, dict):
            continue
        steps.append(Step(str(act.get("tool", "")), dict(act.get("args") or {}),
                          str(t.get("observation", ""))))
    return Traj(id=str(d["episode_id"]), instruction=str(d.get("instruction", "")),
                steps=steps, outcome=str(d.get("outcome")), card_id=str(d.get("card_id")),
                type=str(d.get("type") or "terminal_ops"))


def _from_generic(d: dict[str, Any], where: str) -> Traj:
    steps = []
    for i, s in enumerate(d["steps"]):
        if not isinstance(s, dict) or "tool" not in s:
            raise ConfigError(f"step {i} has no 'tool'", where=where,
                              fix="each step needs tool and args (docs/synthesis.md)")
        steps.append(Step(str(s["tool"]), dict(s.get("args") or {}), str(s.get("output", "")),
                          {str(k): str(v) for k, v in (s.get("files_read") or {}).items()},
                          {str(k): str(v) for k, v in (s.get("files_written") or {}).items()}))
    out = d.get("outcome")
    return Traj(id=str(d.get("id") or where), instruction=str(d.get("instruction", "")),
                steps=steps, outcome=None if out is None else str(out))


def read_trajs(path: str | Path) -> list[Traj]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no trajectory file at {str(p)!r}", where=str(p),
                          fix="pass a JSONL file (ceiling eval --name N writes "
                              "$CEILING_HOME/runs/name-N/trajectories.jsonl)")
    out: list[Traj] = []
    for i, raw in enumerate(p.read_text(errors="replace").splitlines(), 1):
        if not raw.strip():
            continue
        where = f"{p}:{i}"
        try:
            d = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ConfigError(f"not JSON ({e.msg})", where=where,
                              fix="one JSON object per line") from None
        if isinstance(d, dict) and "episode_id" in d and "turns" in d:
            out.append(_from_ceiling(d))
        elif isinstance(d, dict) and isinstance(d.get("steps"), list):
            out.append(_from_generic(d, where))
        else:
            raise ConfigError("neither a ceiling trajectory nor a generic one", where=where,
                              fix="use ceiling's JSONL or {'steps': [...]} (docs/synthesis.md)")
    last = {t.id: i for i, t in enumerate(out)}  # a retried episode: keep its last record
    return [t for i, t in enumerate(out) if last[t.id] == i]


slug = _slug
