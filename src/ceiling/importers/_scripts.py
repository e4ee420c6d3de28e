"""Reading a Harbor task's shell scripts: ``tests/test.sh`` and ``solution/solve.sh``.

Neither is run here. :func:`read_test_sh` sorts every command of ``test.sh`` into what the
importer can carry over (package installs -> image steps; the pytest run -> the hidden
tests and their targets; a command sent to the background -> the grading-time service; the
reward bookkeeping, ``uv``'s own installation and ``cd``/``echo``/``set`` -> nothing) and
anything else, which is a refusal naming the command. :func:`split_solution` takes the
package installs out of ``solve.sh`` (they become image steps: the sandbox has no network)
and leaves the rest byte for byte, heredoc bodies included.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_SPLIT = re.compile(r"\s*(?:&&|\|\||;)\s*")
_BACKGROUND = re.compile(r"(?:^|[^&])&\s*(?:#.*)?$")
_APT = re.compile(r"^(?:sudo\s+)?(?:DEBIAN_FRONTEND=\S+\s+)?apt(?:-get)?\s")
_PIP = re.compile(r"^(?:sudo\s+)?(?:(?:python3?|\S*/python3?)\s+-m\s+)?(?:pip3?|uv\s+pip)\s+install\s")
_UV_ADD = re.compile(r"^uv\s+add\s")
_HARMLESS = re.compile(
    r"^(?:set\s+-[euxo]+(?:\s+pipefail)?|cd\s+\S+|echo\b.*|exit(?:\s+\d+)?|true|:|"
    r"mkdir\s+-p\s+/logs\S*|source\s+\S*(?:\.local/bin/env|\.venv/bin/activate)|"
    r"\.\s+\S*(?:\.local/bin/env|\.venv/bin/activate)|export\s+PATH=\S*|"
    r"uv\s+(?:venv|init|sync|python\s+install)\b.*|"
    r"curl\s.*astral\.sh/uv.*|wget\s.*astral\.sh/uv.*|"
    r"if\s+\[.*\]|\[\s.*\]|then|else|fi|done|"
    r"apt-get\s+(?:clean|autoremove)\b.*|rm\s+-rf\s+/var/lib/apt/lists\S*)$")
_REWARD = re.compile(r"/logs/verifier")


@dataclass
class TestPlan:
    apt: list[str] = field(default_factory=list)
    pip: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)  # paths under /tests
    service: str | None = None
    service_wait_s: float = 0.0
    refusals: list[tuple[str, str]] = field(default_factory=list)  # (reason, detail)
    notes: list[str] = field(default_factory=list)
    pytest_seen: bool = False


def script_lines(text: str) -> list[tuple[str, bool]]:
    """(logical line, inside a heredoc body?) with ``\\`` continuations joined."""
    out: list[tuple[str, bool]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        cur = lines[i]
        i += 1
        while cur.rstrip().endswith("\\") and i < len(lines):
            cur = cur.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
        out.append((cur, False))
        m = _HEREDOC.search(cur)
        if m:
            tag = m.group(2)
            while i < len(lines):
                body = lines[i]
                i += 1
                out.append((body, True))
                if body.strip() == tag:
                    break
    return out


def commands(line: str) -> list[str]:
    """The simple commands of one line (split at ``&&``, ``||`` and ``;``; keywords
    ``if``/``then``/``!`` stripped)."""
    text = line.split(" #", 1)[0].strip()
    if text.startswith("#") or not text:
        return []
    out = []
    for part in _SPLIT.split(text):
        p = part.strip()
        for kw in ("if ", "then ", "else ", "! ", "elif "):
            if p.startswith(kw):
                p = p[len(kw):].strip()
        if p:
            out.append(p)
    return out


def _packages(cmd: str, verb: str) -> list[str]:
    try:
        words = shlex.split(cmd)
    except ValueError:
        return []
    if verb not in words:
        return []
    rest = words[words.index(verb) + 1:]
    out, skip = [], False
    for w in rest:
        if skip:
            skip = False
            continue
        if w in ("-o", "-t", "--target", "--index-url", "-i", "--extra-index-url", "-c",
                 "--constraint", "--python", "-p"):
            skip = True
            continue
        if w.startswith("-"):
            continue
        out.append(w)
    return out


def install(cmd: str) -> tuple[str, list[str]] | None:
    """``("apt", pkgs)`` / ``("pip", pkgs)`` for a package install (``apt-get update`` is
    ``("apt", [])``), else None."""
    if _APT.match(cmd):
        if re.search(r"\binstall\b", cmd):
            return "apt", _packages(cmd, "install")
        if re.search(r"\b(update|upgrade|clean)\b", cmd):
            return "apt", []
        return None
    if _PIP.match(cmd):
        return "pip", _packages(cmd, "install")
    if _UV_ADD.match(cmd):
        return "pip", _packages(cmd, "add")
    return None


def _pytest_parts(cmd: str, plan: TestPlan) -> bool:
    try:
        words = shlex.split(cmd)
    except ValueError:
        return False
    if not any(w == "pytest" or w.endswith("/pytest") or w == "py.test" for w in words):
        return False
    plan.pytest_seen = True
    skip = False
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        if w in ("-w", "--with"):
            plan.pip.append(words[i + 1] if i + 1 < len(words) else "")
            skip = True
        elif w in ("--ctrf", "--junitxml", "-p", "--rootdir", "-c", "--python", "--tb"):
            skip = True
        elif w in ("-k", "-m"):
            plan.refusals.append(("tests:pytest -k/-m selection",
                                  f"test.sh selects tests with {w} {words[i + 1:i + 2]}"))
            skip = True
        elif w.startswith("/tests/") or (w.endswith(".py") and not w.startswith("-")):
            plan.targets.append(w)
    return True


def read_test_sh(text: str) -> TestPlan:
    plan = TestPlan()
    for line, in_doc in script_lines(text):
        if in_doc:
            continue
        stripped = line.strip()
        if stripped.startswith("#") or not stripped:
            continue
        bg = bool(_BACKGROUND.search(stripped)) and "&&" not in stripped.rstrip()[-3:]
        if bg:
            cmd = re.sub(r"&\s*(#.*)?$", "", stripped).strip()
            cmd = re.sub(r"^nohup\s+", "", cmd)
            plan.service = cmd if plan.service is None else f"{plan.service}; {cmd}"
            continue
        for cmd in commands(stripped):
            inst = install(cmd)
            if inst is not None:
                getattr(plan, inst[0]).extend(inst[1])
                continue
            if _pytest_parts(cmd, plan):
                continue
            if _REWARD.search(cmd) or _HARMLESS.match(cmd):
                continue
            m = re.match(r"^sleep\s+(\d+(?:\.\d+)?)$", cmd)
            if m and plan.service is not None:
                plan.service_wait_s += float(m.group(1))
                continue
            plan.refusals.append(("tests:test.sh command",
                                  (f"test.sh runs {cmd[:120]!r}, which has no equivalent in a "
                                  "ceiling card (only package installs, a background service "
                                  "and the pytest run are carried over)")))
    if "curl" in plan.apt and all("astral.sh/uv" in ln for ln, _ in script_lines(text)
                                  if re.search(r"\bcurl\b", ln) and "apt" not in ln):
        plan.apt.remove("curl")  # only fetched uv, whose pytest the runtime's replaces
        plan.notes.append("test.sh's curl (only used to install uv) not installed")
    if not plan.pytest_seen:
        plan.refusals.append(("tests:no pytest run", "test.sh never runs pytest"))
    return plan


def split_solution(text: str) -> tuple[str, list[str], list[str], bool]:
    """``(script without package installs, apt packages, pip packages, backgrounds?)``.
    Install commands are removed from their line (the rest of the line is kept, joined with
    ``&&``); heredoc bodies and every other line stay as they are. ``backgrounds`` says the
    script leaves a process running (``&``, ``nohup``, ``setsid``, ``disown``, a
    ``--daemon``), i.e. the card should be graded with its processes kept."""
    apt: list[str] = []
    pip: list[str] = []
    out: list[str] = []
    bg = False
    for line, in_doc in script_lines(text):
        if in_doc:
            out.append(line)
            continue
        s = line.strip()
        if s and not s.startswith("#") and (_BACKGROUND.search(s) or re.search(
                r"\b(nohup|setsid|disown)\b|--daemon\b|\bservice\s+\S+\s+start\b", s)):
            bg = True
        cmds = commands(s) if "<<" not in s and not s.startswith(("if ", "for ", "while ")) \
            else []
        installs = [c for c in cmds if install(c) is not None]
        if not installs or "|" in s.replace("||", ""):
            out.append(line)
            continue
        for c in installs:
            kind, pkgs = install(c)  # type: ignore[misc]
            (apt if kind == "apt" else pip).extend(pkgs)
        rest = [c for c in cmds if install(c) is None]
        indent = line[:len(line) - len(line.lstrip())]
        out.append(indent + (" && ".join(rest) if rest else ": # installed in the card's image"))
    return "\n".join(out) + ("\n" if text.endswith("\n") else ""), apt, pip, bg


__all__ = ["TestPlan", "commands", "install", "read_test_sh", "script_lines", "split_solution"]
