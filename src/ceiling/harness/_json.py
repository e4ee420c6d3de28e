"""JSON tool calls for chat models: the tool list for the system prompt and the reply parser.

A reply must contain one JSON object ``{"tool": NAME, "args": {...}}``, bare or inside a
```` ```json ```` fence; text around it is ignored. The OpenAI function-call shape
``{"name": NAME, "arguments": {...} | "<json>"}`` is accepted too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..tools import Action

ToolTable = Mapping[str, Mapping[str, str]]
_FENCE = re.compile(r"```(?:json)?\s*\n?(.*?)```", re.DOTALL)


class JsonParseError(ValueError):
    """A reply without one valid tool call; ``str(err)`` is fit for an observation."""


def render_tool_list(tools: ToolTable, descriptions: Mapping[str, str] | None = None) -> str:
    """One line per tool: ``- name(arg, ...): description; arg: what it is``."""
    lines = []
    for name, args in tools.items():
        desc = (descriptions or {}).get(name, "")
        arg_txt = "; ".join(f"{a}: {d}" for a, d in args.items() if d)
        sig = f"- {name}({', '.join(args)})"
        extra = " — ".join(x for x in (desc, arg_txt) if x)
        lines.append(f"{sig}: {extra}" if extra else sig)
    return "\n".join(lines)


def _objects(text: str) -> list[Any]:
    """Every JSON value that starts at a '{' in ``text`` (fenced blocks first)."""
    found: list[Any] = []
    dec = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in candidates:
        i = chunk.find("{")
        while i != -1:
            try:
                obj, end = dec.raw_decode(chunk, i)
            except json.JSONDecodeError:
                i = chunk.find("{", i + 1)
                continue
            found.append(obj)
            i = chunk.find("{", end)
        if found:
            break
    return found


def parse_json_reply(reply: str, tools: ToolTable) -> Action:
    """The first tool call in ``reply``. Raises :class:`JsonParseError` saying what is wrong."""
    if not reply.strip():
        raise JsonParseError('empty reply: answer with {"tool": NAME, "args": {...}}')
    objs = [o for o in _objects(reply) if isinstance(o, dict)]
    calls = [o for o in objs if "tool" in o or "name" in o]
    if not calls:
        if objs:
            raise JsonParseError('the JSON object has no "tool" field: use '
                                 '{"tool": NAME, "args": {...}}')
        raise JsonParseError('no JSON object in the reply: answer with '
                             '{"tool": NAME, "args": {...}}')
    obj = dict(calls[0])
    if "tool" not in obj:
        args = obj.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                raise JsonParseError("'arguments' is not valid JSON") from None
        obj = {"tool": obj.get("name"), "args": args}
    try:
        action = Action.parse_obj(obj)
    except ValueError as e:
        raise JsonParseError(str(e)) from None
    if action.tool not in tools:
        raise JsonParseError(f"unknown tool {action.tool!r}: use one of {', '.join(tools)}")
    return action


def action_to_json(action: Action) -> str:
    """The canonical reply text for an Action (what scripted policies write)."""
    return json.dumps({"tool": action.tool, "args": action.args}, ensure_ascii=False)
