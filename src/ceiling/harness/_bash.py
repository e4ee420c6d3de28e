"""The bash-block protocol: what chat models write without training.

Small instruct models answer in prose around fenced shell blocks, not in JSON tool calls.
This format takes that at its word: each turn, the reply's fenced shell block runs as one
``run`` in ``/workspace`` (``/bin/sh -c``), and its output comes back as the next message.

- **A block**: ```` ```bash ```` / ```` ```sh ```` / ```` ```shell ```` / ```` ```console ````
  or an untagged fence. Prose around it is ignored. With several blocks the *first* runs
  and the rest are ignored (one command per turn). ``$ `` prompts at the start of every
  line of a block are dropped (a ``console`` transcript).
- **Submit**: a block that holds only ``submit`` (or a reply that is just ``submit``).
- **Give up**: a block (or whole reply) whose first line is ``give_up`` or
  ``give_up: REASON``; the rest of the line (and block) is the reason.
- **Card tools** (``sql``, ``search``, ...): a block tagged with the tool's name runs that
  tool with the block as its single argument (```` ```sql ```` ``SELECT ...`` ```` ``` ````).
- **No block** (prose only, an empty block, a block cut at the token limit before its
  closing fence): a failed step; the observation says how to answer. A fence left unclosed
  at the natural end of a reply runs to the end of the reply.

:func:`action_to_bash` renders any Action as a reply this parser reads back to an action
with the same effect: ``read``/``write``/``edit`` become shell commands (``cat``,
``printf``, a ``python3 -c`` replace), so scripted plans play through this format too.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping

from ..tools import CORE_TOOLS, Action

ToolTable = Mapping[str, Mapping[str, str]]
SHELL_TAGS = ("", "bash", "sh", "shell", "console", "zsh", "shell-session")
_GIVE_UP = re.compile(r"^give[_ ]up\b:?\s*(.*)$", re.IGNORECASE | re.DOTALL)
_EDIT_PY = ('import json,sys; a=json.loads(sys.argv[1]); t=open(a["path"]).read(); '
            'n=t.count(a["old"]); assert n==1, "edit: the old text occurs %d times" % n; '
            'open(a["path"],"w").write(t.replace(a["old"],a["new"],1))')
HOW = ("answer with one fenced shell block, e.g. ```bash\\nls -l\\n```; "
       "to finish, a block holding only submit")


class BashParseError(ValueError):
    """A reply without a usable shell block; ``str(err)`` is fit for an observation."""


def _blocks(reply: str) -> list[tuple[str, str, bool]]:
    """Every fenced block as (tag, body, closed), in order. A fence is a line that starts
    with three or more backticks (and a tag); it closes at a line of at least as many
    backticks. An unclosed fence runs to the end of the reply."""
    out = []
    lines = reply.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        head = lines[i].strip()
        if not head.startswith("```"):
            i += 1
            continue
        ticks = len(head) - len(head.lstrip("`"))
        tag = head[ticks:].strip().split(" ")[0].lower() if head[ticks:].strip() else ""
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            s = lines[i].strip()
            if s.startswith("`" * ticks) and not s.strip("`"):
                closed = True
                i += 1
                break
            body.append(lines[i])
            i += 1
        out.append((tag, "\n".join(body), closed))
    return out


def _strip_prompts(body: str) -> str:
    lines = body.split("\n")
    real = [ln for ln in lines if ln.strip()]
    if real and all(ln.lstrip().startswith("$ ") for ln in real):
        lines = [ln.lstrip()[2:] if ln.strip() else ln for ln in lines]
    return "\n".join(lines)


def _ending(text: str) -> Action | None:
    """``submit`` / ``give_up[: reason]`` as the whole of ``text``, else None."""
    t = text.strip().strip("`").strip()
    if t.rstrip(".!").lower() == "submit":
        return Action("submit")
    m = _GIVE_UP.match(t)
    if m is not None:
        return Action("give_up", {"reason": " ".join(m.group(1).split())})
    return None


def parse_bash_reply(reply: str, tools: ToolTable | None = None, *,
                     cut: bool = False) -> Action:
    """The first usable block of ``reply`` as one Action (see the module doc). ``cut``: the
    reply was cut at the token limit, so an unclosed block is refused rather than run
    half-written. Raises :class:`BashParseError` saying what was wrong."""
    table = dict(tools) if tools is not None else dict(CORE_TOOLS)
    if not reply.strip():
        raise BashParseError(f"empty reply: {HOW}")
    blocks = _blocks(reply)
    if not blocks:
        ending = _ending(reply)
        if ending is not None:
            return ending
        raise BashParseError(f"no fenced shell block in the reply: {HOW}")
    for tag, body, closed in blocks:
        if not closed and cut:
            raise BashParseError("the shell block was cut at the token limit before its "
                                 "closing ```: write a shorter command")
        if tag in SHELL_TAGS:
            body = _strip_prompts(body).strip("\n")
            if not body.strip():
                raise BashParseError(f"the shell block is empty: {HOW}")
            ending = _ending(body) if len(body.strip().split("\n")) == 1 or \
                body.lstrip().lower().startswith("give") else None
            return ending or Action("run", {"cmd": body})
        if tag in table and tag not in CORE_TOOLS and len(table[tag]) == 1:
            arg = next(iter(table[tag]))
            return Action(tag, {arg: body.strip()})
    tags = ", ".join(sorted({t for t, _, _ in blocks}))
    raise BashParseError(f"no shell block (found blocks tagged {tags}): {HOW}")


def action_to_bash(action: Action, tools: ToolTable | None = None) -> str:
    """A reply (one fenced block) that :func:`parse_bash_reply` reads as ``action`` or as a
    ``run`` with the same effect (``read``/``write``/``edit`` as shell commands)."""
    a = {k: str(v) for k, v in action.args.items()}
    name = action.tool
    if name == "submit":
        body = "submit"
    elif name == "give_up":
        body = f"give_up: {' '.join(a.get('reason', '').split())}".rstrip()
    elif name == "run":
        body = a["cmd"]
    elif name == "read":
        body = f"cat -- {shlex.quote(a['path'])}"
    elif name == "write":
        p = shlex.quote(a["path"])
        body = (f"mkdir -p -- \"$(dirname -- {p})\" && printf '%s' "
                f"{shlex.quote(a['content'])} > {p}")
    elif name == "edit":
        body = f"python3 -c {shlex.quote(_EDIT_PY)} {shlex.quote(json.dumps(a))}"
    else:
        table = dict(tools) if tools is not None else {}
        if name in table and len(table[name]) == 1 and "```" not in "".join(a.values()):
            return f"```{name}\n{a.get(next(iter(table[name])), '')}\n```"
        raise ValueError(f"tool {name!r} has no bash-block form")
    fence = "````" if "```" in body else "```"
    return f"{fence}bash\n{body}\n{fence}"


__all__ = ["SHELL_TAGS", "BashParseError", "action_to_bash", "parse_bash_reply"]
