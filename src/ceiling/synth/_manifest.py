"""The output folder's bookkeeping: the manifest, the resume log and the report.

``DIR/manifest.jsonl``: one JSON line per written card: ``card`` (folder name), ``id``,
``source``, ``project``, ``version``, ``modifiers``, ``functions``, ``files``,
``difficulty``, ``split``, ``fail_to_pass``, ``pass_to_pass`` (counts) and ``kind``
(``repo`` | ``trajectory``). The split is by source project (all cards of one project
share it), so held-out projects are never trained on.

``DIR/.synth/log.jsonl``: one line per candidate tried (``key``, ``result`` = ``card`` or
``refused``, ``reason``, ``modifiers``, ``project``, ``seconds``). A killed synth reads it
back and skips every candidate it already decided, so it continues where it stopped.
Lines are appended with one ``write`` each and flushed; a partial last line is ignored.

:func:`report` folds the log into the ``--json`` report: cards, candidates, refusals by
reason, yield (cards / candidates), cards per minute, per project and per modifier.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class Log:
    """Append-only JSONL with one write per record, safe across threads of one process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def read(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        out = []
        for raw in self.path.read_bytes().split(b"\n"):
            try:
                rec = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out

    def append(self, rec: dict[str, Any]) -> None:
        line = (json.dumps(rec, sort_keys=True) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size and not self._ends_with_newline():
                    line = b"\n" + line
                os.write(fd, line)
            finally:
                os.close(fd)

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"


def manifest(out: Path) -> Log:
    return Log(out / "manifest.jsonl")


def decisions(out: Path) -> Log:
    return Log(out / ".synth" / "log.jsonl")


def _row() -> dict[str, Any]:
    return {"candidates": 0, "cards": 0, "refusals": {}, "yield": None}


def _add(row: dict[str, Any], rec: dict[str, Any]) -> None:
    row["candidates"] += 1
    if rec.get("result") == "card":
        row["cards"] += 1
    else:
        r = str(rec.get("reason", "unknown"))
        row["refusals"][r] = row["refusals"].get(r, 0) + 1


def _finish(row: dict[str, Any]) -> dict[str, Any]:
    row["yield"] = round(row["cards"] / row["candidates"], 4) if row["candidates"] else None
    row["refusals"] = dict(sorted(row["refusals"].items()))
    return row


def report(records: Iterable[dict[str, Any]], *, seconds: float,
           extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON report over decision records (``seconds``: wall time the cards took)."""
    total = _row()
    by_project: dict[str, dict[str, Any]] = {}
    by_modifier: dict[str, dict[str, Any]] = {}
    by_size: dict[str, dict[str, Any]] = {}
    for rec in records:
        _add(total, rec)
        _add(by_project.setdefault(str(rec.get("project", "?")), _row()), rec)
        mods = rec.get("modifiers") or ["-"]
        for m in set(mods):
            _add(by_modifier.setdefault(str(m), _row()), rec)
        _add(by_size.setdefault(f"{len(mods)} bug(s)", _row()), rec)
    out = _finish(total)
    out["cards_per_min"] = round(out["cards"] / (seconds / 60), 2) if seconds > 0 else None
    out["seconds"] = round(seconds, 1)
    out["per_project"] = {k: _finish(v) for k, v in sorted(by_project.items())}
    out["per_modifier"] = {k: _finish(v) for k, v in sorted(by_modifier.items())}
    out["per_bug_count"] = {k: _finish(v) for k, v in sorted(by_size.items())}
    if extra:
        out.update(extra)
    return out
