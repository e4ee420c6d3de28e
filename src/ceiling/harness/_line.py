"""The line protocol: a plain-text agent format a ~1M-parameter model can learn.

This is the FIXED contract between the harness (which renders prompts and parses replies
at run time) and the tiny base's pre-training corpus (team train renders its episodes with
:func:`render_line_episode`, so the two are byte-identical). An episode reads::

    task: <instruction, newlines replaced by spaces>
    > run: echo hello > notes_fox.txt
    | [ok]
    > submit

A prompt is the same text up to the next action, ending with ``"> "``; the model completes
ONE action line and stops at ``"\\n"``. Action lines:

- ``run: <shell command>`` / ``read: <path>`` / ``give_up: <reason>`` / ``submit``
- ``write: <path> <<< <content>``: in the content a newline is written ``\\n`` and a
  backslash ``\\\\`` (so every content survives the round trip);
- ``edit: {"path": ..., "old": ..., "new": ...}``;
- a card tool with one argument: ``<tool>: <argument>``; in general (and for any tool whose
  single argument would not fit on one line): ``<tool>: <JSON object of args>``.

Observations are *bodies* (no prefix) until rendered: :func:`format_observation` turns a
command result into a body, :func:`render_line_episode` prefixes each body line with
``"| "``. A ``run`` body is stdout lines, stderr lines, then ``[exit N]`` when N != 0;
empty output with exit 0 is ``[ok]``. An unparseable reply gets the body
``[error] <what was wrong>``.

Tokenizer note for whoever trains on this format: prompts end with ``"> "`` (a trailing
space). A byte-level BPE that glues a leading space to the next word would see ``"> "`` at
inference but ``">", " run"`` in training; make ``"> "`` (and ``"| "``) tokens of their own
(e.g. added tokens) so both sides split the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..tools import CORE_TOOLS, ENDING_TOOLS, Action

ACTION_PREFIX = "> "
OBS_PREFIX = "| "
TASK_PREFIX = "task: "
WRITE_SEP = " <<< "

ToolTable = Mapping[str, Mapping[str, str]]  # tool name -> {arg name: description}


class LineParseError(ValueError):
    """A reply that is not one valid action line; ``str(err)`` is fit for an observation."""


def one_line(text: str) -> str:
    """Collapse every kind of line break to a space (instructions and reasons)."""
    return " ".join(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


def escape_content(text: str) -> str:
    """``write:`` content escaping: backslash -> ``\\\\``, newline -> ``\\n``, CR -> ``\\r``."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def unescape_content(text: str) -> str:
    """Inverse of :func:`escape_content`; an unknown escape like ``\\t`` is kept verbatim."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "\\nr":
            out.append({"\\": "\\", "n": "\n", "r": "\r"}[text[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def format_observation(result: Any) -> str:
    """The observation *body* of a step (unprefixed lines; see the module doc).

    ``result`` is an :class:`~ceiling.sandbox.ExecResult`-like object (``exit_code``,
    ``stdout``, ``stderr``, optional ``timed_out``/``truncated``) or plain text (what a
    read/write/tool step returned). Empty output with success renders ``[ok]``.
    """
    if isinstance(result, str):
        body = result.rstrip("\n")
        return body if body.strip() else "[ok]"
    lines: list[str] = []
    for stream in (getattr(result, "stdout", ""), getattr(result, "stderr", "")):
        if stream:
            lines.extend(stream.rstrip("\n").split("\n"))
    if getattr(result, "truncated", False):
        lines.append("[output truncated]")
    if getattr(result, "timed_out", False):
        lines.append("[timed out]")
    code = int(getattr(result, "exit_code", 0))
    if code != 0:
        lines.append(f"[exit {code}]")
    return "\n".join(lines) if lines else "[ok]"


def render_observation(body: str) -> str:
    """Prefix every line of an observation body with ``"| "`` (one trailing newline each).
    An empty body renders nothing (e.g. after ``submit``)."""
    if body == "":
        return ""
    lines = body.replace("\r\n", "\n").split("\n")
    return "".join(f"{OBS_PREFIX}{line}\n" for line in lines)


def render_line_episode(instruction: str, turns: Sequence[tuple[str, str]]) -> str:
    """The full text of an episode as the tiny model sees it.

    ``turns`` are ``(action line, observation body)`` pairs; bodies are unprefixed (the
    output of :func:`format_observation`, or ``""`` for none). When the last action line
    ends the episode (``submit`` / ``give_up``) the text ends after it with ``"\\n"``;
    otherwise it ends with ``"> "``, i.e. it is the prompt for the next action.

    >>> render_line_episode("Make x.", [("run: touch x", "[ok]"), ("submit", "")])
    'task: Make x.\\n> run: touch x\\n| [ok]\\n> submit\\n'
    """
    parts = [f"{TASK_PREFIX}{one_line(instruction)}\n"]
    ended = False
    for action_line, body in turns:
        line = one_line(action_line.rstrip("\r\n"))
        parts.append(f"{ACTION_PREFIX}{line}\n")
        parts.append(render_observation(body))
        ended = _tool_name(line) in ENDING_TOOLS
    if not ended:
        parts.append(ACTION_PREFIX)
    return "".join(parts)


def _tool_name(line: str) -> str:
    head = line.split(":", 1)[0].strip()
    return head


def _json_object(text: str) -> dict[str, Any] | None:
    text = text.strip()
    if not text.startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def parse_line(reply: str, tools: ToolTable | None = None) -> Action:
    """Parse the first line of a reply into one :class:`Action`.

    ``tools`` maps every tool the card offers to its argument names (default: the core
    tools). Raises :class:`LineParseError` with a message fit for the observation.
    """
    table = dict(tools) if tools is not None else dict(CORE_TOOLS)
    line = reply.replace("\r\n", "\n").split("\n", 1)[0].lstrip()
    if line.startswith(ACTION_PREFIX.strip()):  # the model repeated the "> " marker
        line = line[1:].lstrip()
    if not line.strip():
        raise LineParseError("empty reply: write one action line such as 'run: ls'")
    name, sep, rest = line.partition(":")
    name = name.strip()
    rest = rest.removeprefix(" ")
    if name not in table:
        known = ", ".join(sorted(table))
        if not sep:
            raise LineParseError(f"not an action line {line[:60]!r}: use 'TOOL: ARGUMENT' "
                                 f"with TOOL one of {known}")
        raise LineParseError(f"unknown tool {name!r}: use one of {known}")
    arg_names = list(table[name])
    obj = _json_object(rest)
    if name == "submit" or not arg_names:
        if rest.strip() and obj is None:
            raise LineParseError(f"'{name}' takes no argument: write just '{name}'")
        return Action(name, dict(obj or {}))
    if obj is not None and obj and set(obj) <= set(arg_names):
        return Action(name, obj)
    if name == "write":
        path, sep2, content = rest.partition(WRITE_SEP.strip())
        if not sep2:
            raise LineParseError("write needs 'write: PATH <<< CONTENT' "
                                 "(newlines in CONTENT written as \\n)")
        path = path.strip()
        content = content.removeprefix(" ")
        if not path:
            raise LineParseError("write needs a path before '<<<'")
        return Action("write", {"path": path, "content": unescape_content(content)})
    if len(arg_names) == 1:
        if arg_names[0] != "reason" and not rest.strip():
            raise LineParseError(f"{name} needs its argument: '{name}: {arg_names[0].upper()}'")
        return Action(name, {arg_names[0]: rest.strip()})
    raise LineParseError(f"{name} takes {len(arg_names)} arguments: write '{name}: "
                         f"{{\"" + "\": ..., \"".join(arg_names) + "\": ...}' as one JSON object")


def action_to_line(action: Action, tools: ToolTable | None = None) -> str:
    """Render an Action as one action line that :func:`parse_line` reads back exactly.

    Uses the short forms where they are lossless, else ``<tool>: <JSON object>``.
    """
    table = dict(tools) if tools is not None else dict(CORE_TOOLS)
    args = dict(action.args)
    name = action.tool
    as_json = f"{name}: {json.dumps(args, ensure_ascii=False, sort_keys=True)}"
    if name in ENDING_TOOLS and name == "submit":
        return "submit" if not args else as_json
    arg_names = list(table.get(name, args))
    if name == "write" and set(args) == {"path", "content"}:
        path = str(args["path"])
        if path.strip() == path and path and "\n" not in path and WRITE_SEP.strip() not in path \
                and not path.startswith("{"):
            line = f"write: {path}{WRITE_SEP}{escape_content(str(args['content']))}"
            if _roundtrips(line, action, table):
                return line
        return as_json
    if len(arg_names) == 1 and set(args) <= set(arg_names):
        value = str(args.get(arg_names[0], ""))
        line = f"{name}: {value}" if value else name
        if name == "give_up" and not value:
            line = "give_up:"
        if _roundtrips(line, action, table):
            return line
    return as_json


def _roundtrips(line: str, action: Action, table: ToolTable) -> bool:
    try:
        back = parse_line(line, table)
    except LineParseError:
        return False
    return back.tool == action.tool and back.args == {k: str(v) for k, v in action.args.items()}
