"""The oracle's moves: a card's ``solution`` split into one tool call per command.

The scripted oracle plays like a policy: each call is one command, so no reply comes near
the harness's reply cap (8,000 characters) and its call count is the card's horizon.
:func:`oracle_actions` reads the two shapes the families write:

- **line scripts** (the convention of :mod:`ceiling.envs._common`): every non-empty,
  non-comment line is a complete shell command and becomes one ``run``; ``set -e`` and the
  ``#!`` line are dropped.
- **file scripts** (``repo_refactor``/``security_audit`` ``oracle_script``): a
  ``python3 - <<'CEILING_EOF'`` block that writes ``FILES`` (path -> text) and deletes
  ``DELETE``. Each file becomes one ``write`` (a file whose content is longer than
  :data:`CHUNK` characters: a ``write`` of the first chunk, then one ``run`` appending each
  further chunk with ``printf``), the deletions one ``run: rm -f``. Lines outside the block
  (``chmod`` for permission faults) stay ``run`` calls, in order.

Anything else (a hand-written ``solution.sh`` whose lines are not each complete, checked
with ``/bin/sh -n``) is played as before: one ``run`` of the whole script, or, past
:data:`CHUNK` characters, the script appended to ``/tmp/.ceiling-oracle.sh`` chunk by chunk
and then run with ``sh``. The split is a pure function of the card (cached per content id).
The final ``submit`` is not in the list; see :func:`oracle_call_count`.
:func:`horizon_report` checks each card's horizon label against its oracle's call count.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ..cards import TaskCard, horizon_for_steps
from ..tools import Action

CHUNK = 3000  # content characters per call; JSON/shell quoting at most ~2x for source text
_BLOCK = re.compile(r"^(?P<name>\w+)\(\)\s*\{\s*\n\s*python3 - <<'(?P<tag>\w+)'\n(?P<body>.*?)\n"
                    r"(?P=tag)\n\}\s*$", re.DOTALL | re.MULTILINE)
_SCRIPT_FILE = "/tmp/.ceiling-oracle.sh"


def _commands(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")
            and ln.strip() not in ("set -e", "set -eu", "set -euo pipefail")]


def _complete(cmds: list[str]) -> bool:
    """Whether every command parses on its own (``/bin/sh -n``), i.e. no line continues a
    multi-line construct."""
    if any("<<" in c.replace("<<<", "") for c in cmds):
        return False
    script = 'for l in "$@"; do /bin/sh -n -c "$l" 2>/dev/null || { echo "$l"; exit 1; }; done'
    try:
        r = subprocess.run(["/bin/sh", "-c", script, "_", *cmds], capture_output=True,
                           timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def _chunks(text: str) -> list[str]:
    return [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]


def _write_file(path: str, text: str) -> list[Action]:
    parts = _chunks(text)
    out = [Action("write", {"path": path, "content": parts[0]})]
    out += [Action("run", {"cmd": f"printf '%s' {shlex.quote(p)} >> {shlex.quote(path)}"})
            for p in parts[1:]]
    return out


def _file_block(body: str) -> list[Action] | None:
    """Writes and deletions of an ``oracle_script`` python block, or None for other code."""
    found: dict[str, object] = {}
    for ln in body.split("\n"):
        for key in ("FILES", "DELETE"):
            if ln.startswith(f"{key} = "):
                try:
                    found[key] = ast.literal_eval(ln[len(key) + 3:])
                except (ValueError, SyntaxError):
                    return None
    files, delete = found.get("FILES"), found.get("DELETE", [])
    if not isinstance(files, dict) or not isinstance(delete, list):
        return None
    out: list[Action] = []
    for path, text in files.items():
        if not isinstance(path, str) or not isinstance(text, str):
            return None
        out += _write_file(path, text)
    if delete:
        out.append(Action("run", {"cmd": "rm -f -- " + " ".join(shlex.quote(str(p))
                                                                for p in delete)}))
    return out


def _whole_script(script: str) -> list[Action]:
    if len(script) <= CHUNK:
        return [Action("run", {"cmd": script})]
    q = shlex.quote(_SCRIPT_FILE)
    out = [Action("run", {"cmd": f"printf '%s' {shlex.quote(p)} {'>' if i == 0 else '>>'} {q}"})
           for i, p in enumerate(_chunks(script))]
    return [*out, Action("run", {"cmd": f"sh {q}"})]


@lru_cache(maxsize=4096)
def _split(script: str) -> tuple[Action, ...]:
    m = _BLOCK.search(script)
    if m is not None:
        block = _file_block(m.group("body"))
        rest = script[:m.start()].split("\n") + ["\x00BLOCK"] + script[m.end():].split("\n")
        call = f"{m.group('name')} || {m.group('name')}"
        rest = [ln for ln in rest if ln.strip() not in (m.group("name"), call)]
        cmds = _commands([ln for ln in rest if ln != "\x00BLOCK"])
        if block is not None and _complete(cmds):
            out: list[Action] = []
            for ln in _commands(rest):
                out += block if ln == "\x00BLOCK" else [Action("run", {"cmd": ln})]
            return tuple(out)
        return tuple(_whole_script(script))
    cmds = _commands(script.split("\n"))
    if cmds and _complete(cmds):
        return tuple(Action("run", {"cmd": c}) for c in cmds)
    return tuple(_whole_script(script)) if cmds else ()


def oracle_actions(card: TaskCard) -> list[Action]:
    """The oracle's calls on ``card`` before its final ``submit`` (see the module doc); an
    infeasible card's list is one ``give_up`` with the card's reason."""
    if not card.feasible:
        return [Action("give_up", {"reason": card.infeasible_reason or "not feasible"})]
    return list(_split(card.solution))


def oracle_call_count(card: TaskCard) -> int:
    """The calls the oracle makes on a feasible card, ``submit`` included (the count the
    horizon label is checked against: short < 10, medium 10-30, long > 30)."""
    return len(_split(card.solution)) + 1




def horizon_report(played: Iterable[tuple[TaskCard, int]]) -> dict[str, Any]:
    """Check horizon labels against the oracle's call counts (short < 10, medium 10-30,
    long > 30; :func:`~ceiling.cards.horizon_for_steps`). ``played`` holds (card, calls the
    oracle took, ``submit`` included); infeasible cards are skipped (their oracle gives up
    at once; the label is their feasible twin's).

    Returns ``{"checked", "mislabelled_cards", "templates": {TEMPLATE: {"label": {LABEL:
    n}, "calls": [min, max], "want": {LABEL: n}, "mislabelled": n}}, "mislabelled_templates":
    [TEMPLATE, ...]}``; a template is listed when any of its cards is mislabelled."""
    rows: dict[str, dict[str, Any]] = {}
    checked = bad = 0
    for card, calls in played:
        if not card.feasible:
            continue
        checked += 1
        want = horizon_for_steps(calls)
        key = f"{card.template or card.id}@d{card.difficulty}"
        r = rows.setdefault(key, {"label": {}, "calls": [calls, calls], "want": {},
                                  "mislabelled": 0})
        r["label"][card.horizon] = r["label"].get(card.horizon, 0) + 1
        r["want"][want] = r["want"].get(want, 0) + 1
        r["calls"] = [min(r["calls"][0], calls), max(r["calls"][1], calls)]
        if want != card.horizon:
            r["mislabelled"] += 1
            bad += 1
    return {"checked": checked, "mislabelled_cards": bad,
            "templates": dict(sorted(rows.items())),
            "mislabelled_templates": sorted(k for k, r in rows.items() if r["mislabelled"])}


__all__ = ["CHUNK", "horizon_report", "oracle_actions", "oracle_call_count"]
