"""Commands the symbolic replay does not invert, read for what they touch.

A ``sed`` script with addresses, an ``awk | sort | uniq -c > report`` pipeline, ``tar czf
x $(find d -name '*.csv')``: their effect on a file depends on content the trajectory never
showed, so the replay cannot compute it. It can still say **which paths** such a command
reads, writes or changes in place, and what an input must hold for the command to do
something (a line matching a ``sed`` address, a file under a ``find`` root, a real archive
for ``tar x``). :func:`analyze` returns that as :class:`Touch`; the card then tests the end
state against a **reference run** (the trajectory's commands replayed by the verifier from
the card's own start, ``acceptance.reference``), not against a value the replay guessed.

Only programs whose file arguments can be told apart are read (:data:`PROGRAMS`); anything
else (``git``, network tools, unknown programs), unquoted globs, ``cd`` and paths outside
the workspace still refuse the trajectory with a reason.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

# program -> options that take a value (the value is not a path operand)
PROGRAMS: dict[str, frozenset[str]] = {
    "sed": frozenset({"-e", "-f", "-l"}),
    "awk": frozenset({"-F", "-v", "-f"}),
    "sort": frozenset({"-k", "-t", "-o", "-S", "-T"}),
    "uniq": frozenset({"-f", "-s", "-w"}),
    "cut": frozenset({"-d", "-f", "-c", "-b"}),
    "tr": frozenset(),
    "head": frozenset({"-n", "-c"}),
    "tail": frozenset({"-n", "-c"}),
    "grep": frozenset({"-e", "-f", "-m", "-A", "-B", "-C"}),
    "wc": frozenset(),
    "cat": frozenset(),
    "tac": frozenset(),
    "paste": frozenset({"-d"}),
    "join": frozenset({"-t", "-1", "-2", "-o"}),
    "comm": frozenset(),
    "nl": frozenset(),
    "tee": frozenset(),
    "tar": frozenset({"-C", "-f", "--exclude"}),
    "gzip": frozenset(),
    "gunzip": frozenset(),
    "zcat": frozenset(),
    "find": frozenset(),
    "sh": frozenset(),
    "bash": frozenset(),
    "mkdir": frozenset({"-m"}),
    "echo": frozenset(),
    "printf": frozenset(),
    "true": frozenset(),
    "ls": frozenset(),
    "python3": frozenset(),  # only as ``python3 -m tarfile``
    "python": frozenset(),
}
# the first operand is a program/pattern, not a path (unless -e/-f gave it)
_SCRIPT_FIRST = {"sed", "awk", "grep"}
_PATHLIKE = re.compile(r"^[A-Za-z0-9_./\-]+$")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip", ".gz")


@dataclass
class Touch:
    """What one opaque command line reads (``inputs``: must exist at that point; ``scripts``
    among them are run by ``sh``/``bash``), writes
    (``outputs``: created or replaced), changes in place (``inplace``), which folders it
    reads files from (``finds``: folder -> an example name its pattern matches), and lines
    its inputs should hold for it to act (``examples``: path -> lines)."""

    inputs: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)  # inputs run by sh/bash
    outputs: list[str] = field(default_factory=list)
    inplace: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    finds: dict[str, str] = field(default_factory=dict)
    examples: dict[str, list[bytes]] = field(default_factory=dict)


def _refuse(detail: str) -> Exception:
    from ._replay import Unrecoverable

    return Unrecoverable("unsupported_command", detail)


def _path(tok: str) -> str:
    from ._replay import _norm

    return _norm(tok)


def regex_example(pattern: str) -> str | None:
    """A line that the (basic or extended) regular expression ``pattern`` matches, or None
    when it is beyond this small generator (checked with Python's ``re``)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        nxt = pattern[i + 1] if i + 1 < n else ""
        if c in "^$":
            i += 1
            continue
        if c == "\\" and nxt:
            atom = {"s": " ", "d": "0", "w": "a", "t": "\t"}.get(nxt, nxt)
            if nxt in "(){}|+?":
                return None  # BRE groups and intervals: not generated
            i += 2
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                return None
            body = pattern[i + 1:j]
            atom = "x" if body.startswith("^") else body[0]
            i = j + 1
        elif c == ".":
            atom, i = "x", i + 1
        elif c in "()|{}+?*":
            return None
        else:
            atom, i = c, i + 1
        q = pattern[i] if i < n else ""
        if q == "*":
            i += 1
            continue  # zero of it
        out.append(atom)
    text = "".join(out)
    try:
        ok = re.search(pattern.replace("\\(", "(").replace("\\)", ")"), text) is not None
    except re.error:
        ok = False
    return text if ok else None


def sed_examples(script: str) -> list[bytes]:
    """Lines a file should hold for ``script`` to act: an example of each address and of
    each ``s`` pattern, the patterns right after the first address (inside its range)."""
    subs: list[str] = []
    rest = script
    for m in re.finditer(r"s([^\w\s\\])((?:\\.|(?!\1).)*)\1", script):
        subs.append(m[2])
        rest = rest.replace(m[0], " ")
    addrs = [m[1] for m in re.finditer(r"/((?:\\.|[^/\\])*)/", rest)]
    lines = [regex_example(a) for a in addrs]
    sub_lines = [regex_example(s) for s in subs]
    ordered = lines[:1] + sub_lines + lines[1:]
    return [x.encode() for x in ordered if x is not None and x != ""]


def _example_name(pattern: str) -> str:
    """A file name the ``find -name`` glob ``pattern`` matches."""
    name = pattern.replace("*", "part-1", 1).replace("*", "").replace("?", "a")
    return name if _PATHLIKE.match(name) and "/" not in name else "part-1.txt"


def _subst(line: str) -> tuple[str, list[str]]:
    """``line`` with each ``$(...)`` replaced by a placeholder, and the inner commands."""
    inner: list[str] = []
    out, i = [], 0
    while i < len(line):
        if line.startswith("$(", i):
            depth, j = 1, i + 2
            while j < len(line) and depth:
                depth += {"(": 1, ")": -1}.get(line[j], 0)
                j += 1
            if depth:
                raise _refuse("unbalanced command substitution")
            inner.append(line[i + 2:j - 1])
            out.append(" __SUBST__ ")
            i = j
        else:
            out.append(line[i])
            i += 1
    return "".join(out), inner


def analyze(line: str) -> Touch:
    """The paths one shell line reads, writes and changes (see the module doc); raises
    ``Unrecoverable`` for what it cannot tell."""
    if "`" in line or "<<" in line:
        raise _refuse("backquotes or heredoc")
    flat, inner = _subst(line)
    touch = Touch()
    for cmd in [*inner, flat]:
        for seg in split_unquoted(cmd):
            _one(seg, touch)
    return touch


def split_unquoted(line: str) -> list[str]:
    """``line`` cut at the shell's unquoted ``|``, ``||``, ``&&`` and ``;``; raises
    ``Unrecoverable`` for an unquoted glob character (its expansion is unknown)."""
    segs, cur = [], []
    quote = ""
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"' and i + 1 < len(line):
                cur.append(c)
                i += 1
                c = line[i]
            cur.append(c)
        elif c in "'\"":
            quote = c
            cur.append(c)
        elif c == "\\" and i + 1 < len(line):
            cur += [c, line[i + 1]]
            i += 1
        elif c in "|;" or line.startswith("&&", i):
            segs.append("".join(cur))
            cur = []
            if line.startswith(("||", "&&"), i):
                i += 1
        elif c in "*?[":
            raise _refuse("glob pattern")
        else:
            cur.append(c)
        i += 1
    if quote:
        raise _refuse("unbalanced quotes")
    segs.append("".join(cur))
    return [x.strip() for x in segs if x.strip()]


def _one(seg: str, touch: Touch) -> None:
    try:
        toks = shlex.split(seg)
    except ValueError:
        raise _refuse("unbalanced quotes") from None
    words: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in ("2>/dev/null", "2>&1", ">/dev/null", "&>/dev/null"):
            i += 1
        elif t in (">", ">>", "<") and i + 1 < len(toks):
            target = _path(toks[i + 1])
            (touch.inputs if t == "<" else touch.outputs).append(target)
            i += 2
        elif t.startswith((">", "<")) and not t.startswith("2>"):
            op = ">>" if t.startswith(">>") else t[0]
            target = _path(t[len(op):])
            (touch.inputs if op == "<" else touch.outputs).append(target)
            i += 1
        else:
            words.append(t)
            i += 1
    while words and words[0] in ("(", "{"):  # a subshell or group around one command
        words = words[1:]
    while words and words[-1] in (")", "}"):
        words = words[:-1]
    if not words:
        return
    prog, args = words[0], words[1:]
    if prog == "__SUBST__":
        raise _refuse("a command substitution as the program")
    if prog not in PROGRAMS:
        raise _refuse(prog)
    if prog == "find":
        _find(args, touch)
        return
    if prog == "tar":
        _tar(args, touch)
        return
    if prog in ("python3", "python"):
        _pytar(args, touch)
        return
    takes = PROGRAMS[prog]
    operands: list[str] = []
    script_given = False
    inplace = False
    j = 0
    while j < len(args):
        a = args[j]
        if a in takes and j + 1 < len(args):
            if prog == "sed" and a == "-e":
                touch.examples.setdefault("__sed__", []).extend(sed_examples(args[j + 1]))
                script_given = True
            elif a in ("-f",) and prog in ("awk", "sed", "grep"):
                touch.inputs.append(_path(args[j + 1]))
                script_given = True
            elif a in ("-e",) and prog == "grep":
                script_given = True
            elif prog == "sort" and a == "-o":
                touch.outputs.append(_path(args[j + 1]))
            j += 2
            continue
        if a.startswith("-") and a != "-":
            if prog == "sed" and a.startswith("-i"):
                inplace = True
            j += 1
            continue
        operands.append(a)
        j += 1
    if prog in _SCRIPT_FIRST and not script_given and operands:
        script = operands.pop(0)
        if prog == "sed":
            touch.examples.setdefault("__sed__", []).extend(sed_examples(script))
    if prog in ("echo", "printf", "true", "ls"):
        return
    if prog == "mkdir":
        touch.dirs += [_path(a) for a in operands]
        return
    for a in operands:
        if a == "__SUBST__":
            continue
        if not _PATHLIKE.match(a):
            raise _refuse(f"{prog} operand {a!r} is not a plain path")
        p = _path(a)
        if prog == "tee":
            touch.outputs.append(p)
        elif prog in ("sh", "bash"):
            touch.inputs.append(p)
            touch.scripts.append(p)
            break  # the rest are the script's own arguments
        elif prog == "sed" and inplace:
            touch.inplace.append(p)
            touch.examples.setdefault(p, []).extend(touch.examples.get("__sed__", []))
        elif prog in ("gzip", "gunzip"):
            touch.inplace.append(p)  # replaced by its (de)compressed twin
        else:
            touch.inputs.append(p)
    touch.examples.pop("__sed__", None)


def _find(args: list[str], touch: Touch) -> None:
    roots: list[str] = []
    j = 0
    while j < len(args) and not args[j].startswith(("-", "(", "!")):
        roots.append(_path(args[j]))
        j += 1
    name = "part-1.txt"
    while j < len(args):
        if args[j] in ("-name", "-iname") and j + 1 < len(args):
            name = _example_name(args[j + 1])
            j += 2
        elif args[j] in ("-delete", "-exec", "-execdir", "-ok", "-fprint"):
            raise _refuse(f"find {args[j]}")
        else:
            j += 1
    for r in roots or ["."]:
        touch.finds[r] = name


def _pytar(args: list[str], touch: Touch) -> None:
    """``python3 -m tarfile -c ARCHIVE FILE...`` / ``-e ARCHIVE [DIR]`` / ``-l ARCHIVE``."""
    if args[:2] != ["-m", "tarfile"] or len(args) < 4:
        raise _refuse("python3 other than -m tarfile -c/-e/-l")
    mode, archive, rest = args[2], _path(args[3]), args[4:]
    if mode in ("-c", "--create"):
        touch.outputs.append(archive)
        touch.inputs += [_path(a) for a in rest if a != "__SUBST__"]
    elif mode in ("-e", "--extract", "-l", "--list"):
        touch.inputs.append(archive)
        for a in rest[:1]:
            _path(a)  # checked: inside the workspace
    else:
        raise _refuse(f"python3 -m tarfile {mode}")


def _tar(args: list[str], touch: Touch) -> None:
    if not args:
        raise _refuse("tar without a mode")
    mode = args[0].lstrip("-")
    rest = args[1:]
    archive = None
    if "f" not in mode:
        raise _refuse("tar without f (standard input or output)")
    if not rest:
        raise _refuse("tar f without an archive")
    if rest[0] != "-":  # "-": standard input/output, a redirection names the file
        archive = _path(rest[0])
    rest = rest[1:]
    operands: list[str] = []
    j = 0
    while j < len(rest):
        a = rest[j]
        if a == "-C" and j + 1 < len(rest):
            _path(rest[j + 1])  # checked: inside the workspace (made by an earlier mkdir)
            j += 2
            continue
        if a.startswith("-"):
            if a.startswith("-f") or a == "--file":
                raise _refuse("tar options after the mode")
            j += 1
            continue
        operands.append(a)
        j += 1
    if "c" in mode:
        touch.outputs += [archive] if archive else []
        touch.inputs += [_path(a) for a in operands if a != "__SUBST__"]
    elif "x" in mode or "t" in mode:
        touch.inputs += [archive] if archive else []
    else:
        raise _refuse(f"tar mode {mode!r}")


__all__ = ["ARCHIVE_SUFFIXES", "PROGRAMS", "Touch", "analyze", "regex_example",
           "sed_examples"]
