"""Actions and tools: one tool call per environment step.

Core tools every card has: ``run(cmd)``, ``read(path)``, ``write(path, content)``,
``edit(path, old, new)``, ``submit()``, ``give_up(reason)``. A card may declare more
(``sql(query)``, ``search(query)``) through ``TaskCard.tools``; :func:`run_card_tool` runs
them inside the sandbox:

- ``sql`` (name ``sql`` or ``config["kind"] == "sql"``): ``config["db"]`` is a SQLite file
  relative to the workspace; the one argument is the query; rows come back tab-separated.
  ``config["readonly"]`` (default true) opens the database read-only.
- ``search`` (name ``search`` or kind ``search``): case-insensitive fixed-string search over
  ``config["root"]`` (default ``.``); prints ``path:line:text`` for up to 50 hits.
- ``command`` (``config["command"]`` set): a shell command run in the workspace with each
  argument in the environment as ``ARG_<NAME>`` (upper case), e.g.
  ``python3 tools/lookup.py "$ARG_QUERY"``.

Tools run inside the sandbox like ``run``; they never execute in the caller's process.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .cards import TaskCard, ToolSpec
    from .sandbox import ExecResult, Sandbox

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
CARD_TOOL_KINDS = ("sql", "search", "command")


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
            raise ValueError('a tool call is {"tool": NAME, "args": {...}}')  # noqa: TRY004
        args = obj.get("args", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ValueError("'args' must be an object of named arguments")  # noqa: TRY004
        return cls(obj["tool"], dict(args))


#: An episode so far, as a plan sees it: ``(action, observation)`` pairs, oldest first.
History = list[tuple[Action, str]]


@runtime_checkable
class Plan(Protocol):
    """A scripted agent: picks the next :class:`Action` from the card and the history.

    It must be a pure function of its arguments and its own construction parameters, so an
    episode replays exactly. The oracle, null and random plans and the exploit corpus live in
    :mod:`ceiling.verify`; ``scripted:*`` policies render a plan's actions as reply text."""

    name: str

    def next_action(self, card: TaskCard, history: History) -> Action: ...


def card_tools(card: TaskCard) -> dict[str, dict[str, str]]:
    """Every tool of ``card``: name -> {argument: description}, core tools first.
    Harnesses render this list in their prompts."""
    out = {k: dict(v) for k, v in CORE_TOOLS.items()}
    for spec in card.tools:
        out[spec.name] = dict(spec.args)
    return out


def tool_kind(spec: ToolSpec) -> str | None:
    """Which built-in runner serves a card tool, or None when none does."""
    kind = spec.config.get("kind")
    if isinstance(kind, str):
        return kind if kind in CARD_TOOL_KINDS else None
    if "command" in spec.config:
        return "command"
    return spec.name if spec.name in ("sql", "search") else None


def check_args(tool: str, args: dict[str, Any], tools: dict[str, dict[str, str]]) -> str | None:
    """None when ``args`` fit ``tool``; else a one-line message for the observation.
    Every declared argument is required and must be a string (``give_up``'s reason may be
    omitted)."""
    if tool not in tools:
        from ._errors import nearest

        hint = nearest(tool, list(tools))
        return (f"unknown tool {tool!r}" + (f" (did you mean {hint!r}?)" if hint else "")
                + f"; tools: {', '.join(tools)}")
    want = tools[tool]
    extra = sorted(set(args) - set(want))
    if extra:
        return f"{tool}: unexpected argument(s) {extra}; expected {sorted(want) or 'none'}"
    for name in want:
        if name not in args:
            if tool == "give_up":
                continue
            return f"{tool}: missing argument {name!r} ({want[name]})"
        if not isinstance(args[name], str):
            return f"{tool}: argument {name!r} must be a string, got {type(args[name]).__name__}"
    return None


_SQL = r"""
import sqlite3, sys
db, query, ro = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
try:
    con = sqlite3.connect(("file:" + db + "?mode=ro") if ro else db, uri=ro, timeout=2)
    cur = con.execute(query)
    rows = cur.fetchmany(201)
    if cur.description:
        print("\t".join(d[0] for d in cur.description))
    for r in rows[:200]:
        print("\t".join("NULL" if v is None else str(v) for v in r))
    if len(rows) > 200:
        print("... (more rows)")
    con.commit()
except sqlite3.Error as e:
    print("sql error: " + str(e), file=sys.stderr)
    sys.exit(1)
"""

_SEARCH = r"""
import os, sys
root, q = sys.argv[1], sys.argv[2].lower()
hits = 0
for d, dirs, files in os.walk(root):
    dirs[:] = sorted(x for x in dirs if not x.startswith("."))
    for f in sorted(files):
        p = os.path.join(d, f)
        try:
            lines = open(p, encoding="utf-8").read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for i, line in enumerate(lines, 1):
            if q in line.lower():
                print(f"{os.path.relpath(p, root)}:{i}:{line[:200]}")
                hits += 1
                if hits >= 50:
                    sys.exit(0)
if hits == 0:
    print("no matches")
"""


def run_card_tool(sandbox: Sandbox, spec: ToolSpec, args: dict[str, str],
                  timeout: float) -> ExecResult:
    """Run a card tool inside ``sandbox``. Raises ValueError when the card declares a tool
    no runner serves (the step fails with that message)."""
    kind = tool_kind(spec)
    values = [args[k] for k in spec.args]
    if kind == "sql":
        db = str(spec.config.get("db", "data.db"))
        ro = "1" if spec.config.get("readonly", True) else "0"
        return sandbox.exec([sandbox.python, "-I", "-c", _SQL, db, values[0] if values else "",
                             ro], timeout=timeout)
    if kind == "search":
        root = str(spec.config.get("root", "."))
        return sandbox.exec([sandbox.python, "-I", "-c", _SEARCH, root,
                             values[0] if values else ""], timeout=timeout)
    if kind == "command":
        env = {f"ARG_{k.upper()}": str(v) for k, v in args.items()}
        return sandbox.exec(str(spec.config["command"]), timeout=timeout, env=env)
    raise ValueError(f"tool {spec.name!r} has no runner (set config.kind to one of "
                     f"{CARD_TOOL_KINDS})")


__all__ = ["CARD_TOOL_KINDS", "CORE_TOOLS", "ENDING_TOOLS", "Action", "card_tools",
           "check_args", "run_card_tool", "tool_kind"]
