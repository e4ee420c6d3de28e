"""Actions: one tool call per environment step.

Core tools every card has: ``run(cmd)``, ``read(path)``, ``write(path, content)``,
``edit(path, old, new)``, ``submit()``, ``give_up(reason)``. A card may declare more
(``sql(query)``, ``search(query)``) through ``TaskCard.tools``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

CORE_TOOLS: dict[str, dict[str, str]] = {
    "run": {"cmd": "a shell command, run with cwd /workspace"},
    "read": {"path": "a file path relative to /workspace"},
    "write": {"path": "a file path relative to /workspace", "content": "the full new content"},
    "edit": {"path": "a file path", "old": "exact text to replace (must occur once)",
             "new": "replacement text"},
    "submit": {},
    "give_up": {"reason": "why the task cannot or should not be done"},
}
ENDING_TOOLS = ("submit", "give_up")


@dataclass(frozen=True, slots=True)
class Action:
    """One tool call. ``tool`` names a core or card tool; ``args`` its keyword arguments."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"tool": self.tool, "args": self.args}, sort_keys=True)

    @classmethod
    def parse_obj(cls, obj: Any) -> Action:
        """Accept an Action, a ``{"tool", "args"}`` mapping or its JSON text. Raises
        ValueError with a message fit for an observation when it is not a tool call."""
        if isinstance(obj, Action):
            return obj
        if isinstance(obj, str):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as e:
                raise ValueError(f"not a JSON tool call ({e.msg})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("tool"), str):
            raise ValueError('a tool call is {"tool": NAME, "args": {...}}')
        args = obj.get("args", {})
        if not isinstance(args, dict):
            raise ValueError("'args' must be an object of named arguments")
        return cls(obj["tool"], dict(args))


__all__ = ["CORE_TOOLS", "ENDING_TOOLS", "Action"]
