"""A Dockerfile read into instructions, for the Harbor importer.

:func:`parse` joins continuation lines, drops comments and parser directives, expands
``ARG``/``ENV`` variables (``$X``, ``${X}``, ``${X:-default}``) in the instructions that
Docker expands them in, and returns ``(keyword, args, flags, line)`` tuples. It never runs
anything. Which instructions the importer supports and which it refuses is decided in
:mod:`._harbor` (``SUPPORTED``, ``IGNORED``; everything else is refused by name).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

_VAR = re.compile(r"\$(?:\{(?P<b>[A-Za-z_][A-Za-z0-9_]*)(?::?-(?P<d>[^}]*))?\}|(?P<n>[A-Za-z_][A-Za-z0-9_]*))")
EXPANDED = frozenset({"ADD", "COPY", "ENV", "EXPOSE", "FROM", "LABEL", "STOPSIGNAL", "USER",
                      "VOLUME", "WORKDIR", "ARG"})


@dataclass
class Instruction:
    keyword: str
    args: str  # the rest of the line (variables expanded where Docker expands them)
    flags: dict[str, str] = field(default_factory=dict)  # --chown=..., --from=...
    line: int = 0
    raw: str = ""

    def words(self) -> list[str]:
        """The arguments as a list: JSON (exec) form or whitespace-split shell words."""
        text = self.args.strip()
        if text.startswith("["):
            try:
                val = json.loads(text)
                if isinstance(val, list) and all(isinstance(x, str) for x in val):
                    return val
            except json.JSONDecodeError:
                pass
        return shlex.split(text, posix=True)


def expand(text: str, env: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group("b") or m.group("n")
        if name in env:
            return env[name]
        return m.group("d") if m.group("d") is not None else ""

    return _VAR.sub(sub, text)


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, joined text) of every instruction, comments dropped; a heredoc
    (``<<EOF``) body is kept verbatim in its instruction."""
    out: list[tuple[int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start, cur = i + 1, ""
        while i < len(lines):
            ln = lines[i]
            i += 1
            if not cur and (not ln.strip() or ln.lstrip().startswith("#")):
                start = i + 1
                continue
            if cur and ln.lstrip().startswith("#"):
                continue  # comment lines inside a continued instruction
            if ln.rstrip().endswith("\\"):
                cur += ln.rstrip()[:-1] + " "
                continue
            cur += ln
            m = re.search(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?", cur)
            if m and cur.split(None, 1)[0].upper() in ("RUN", "COPY"):
                tag = m.group(1)
                body = []
                while i < len(lines) and lines[i].strip() != tag:
                    body.append(lines[i])
                    i += 1
                i += 1
                cur += "\n" + "\n".join(body) + "\n" + tag
            break
        if cur.strip():
            out.append((start, cur.strip()))
    return out


def parse(text: str, build_args: dict[str, str] | None = None) -> list[Instruction]:
    env: dict[str, str] = dict(build_args or {})
    out: list[Instruction] = []
    for no, line in logical_lines(text):
        parts = line.split(None, 1)
        kw = parts[0].upper()
        rest = parts[1] if len(parts) > 1 else ""
        flags: dict[str, str] = {}
        while kw in ("COPY", "ADD", "RUN", "FROM") and rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            name, _, val = flag[2:].partition("=")
            flags[name] = val
            rest = rest.lstrip()
        if kw in EXPANDED:
            rest = expand(rest, env)
        ins = Instruction(kw, rest, flags, no, line)
        if kw == "ARG":
            name, _, default = rest.partition("=")
            env.setdefault(name.strip(), default.strip().strip('"'))
        elif kw == "ENV":
            for k, v in env_pairs(rest):
                env[k] = v
        out.append(ins)
    return out


def env_pairs(rest: str) -> list[tuple[str, str]]:
    """``ENV a=1 b="x y"`` or the legacy ``ENV a 1 2``."""
    words = shlex.split(rest, posix=True)
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    out = []
    for w in words:
        k, _, v = w.partition("=")
        out.append((k, v))
    return out


__all__ = ["EXPANDED", "Instruction", "env_pairs", "expand", "logical_lines", "parse"]
