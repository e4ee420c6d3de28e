"""Recovering a trajectory's initial workspace by replaying its file operations.

The trajectory is played forward over a *symbolic* file system: every path starts as "its
own unknown initial content" and each operation transforms that value:

- ``write`` / ``echo X > f`` / ``: > f`` / ``printf`` make the content known; a path first
  met by a write **did not exist** at the start (a created file);
- ``read`` / ``cat f`` observations reveal a content; the operations applied since the
  start are **undone** on it (an ``edit`` is reversed when its new text occurs once, an
  append is cut off) to recover the initial content; a file read before it was written
  keeps what was read;
- ``mv``/``cp``/``rm``/``chmod``/``mkdir``/``touch``, ``echo/printf/cat >> f``,
  ``sed -i 's/LITERAL/LITERAL/[g]'`` and ``edit`` on an unknown content are recorded as
  operations on it;
- read-only commands (``ls``, ``grep``, ``head``, ``wc`` ... without redirection) change
  nothing; a command it cannot invert (a ``sed`` script with addresses, a pipeline into a
  file, ``tar``, ``sh SCRIPT``) is read by :mod:`._opaque` for the paths it reads and
  writes: its inputs must exist and are filled so that it acts (:func:`opaque_fill`), its
  outputs become *opaque* (``Recovery.opaque``: the card is then tested against the
  verifier's reference run); what neither can read (``git``, network tools, unquoted
  globs, ``cd``) makes the trajectory **unrecoverable** with a reason.

Then (:class:`Recovery`) the initial workspace holds every path the trajectory shows existed:
recovered contents where observed (``exact``), else a **fill** where the operations never
depend on the content (a move, copy, delete, mode change or append) or only need a literal
in it (``sed``/``edit``: the fill holds the literal). Modes changed by ``chmod`` start at a
filled mode different from the final one. The end state per path is known exactly,
relationally (ends with the appended text, holds the substituted literal and not the
replaced one), or as absent; those become the card's tests.

Limits: ``read`` observations lose trailing newlines (ceiling's read tool strips them), so
an observed text gets exactly one ``\\n`` back; commands are assumed to have succeeded (the
trajectory solved its task); paths are workspace-relative (``/workspace/x`` is accepted).
"""

from __future__ import annotations

import copy
import gzip
import io
import re
import shlex
import tarfile
import zipfile
from dataclasses import dataclass, field

from ._traj_read import Traj

READ_ONLY = frozenset({"ls", "pwd", "head", "tail", "grep", "wc", "find", "stat", "test", "[",
                       "true", "diff", "sort", "uniq", "file", "du", "df", "echo", "printf",
                       "cat", "od", "xxd", "md5sum", "sha256sum", "cmp", "id", "whoami",
                       "date", "env", "which", "type", "tree", "less", "more"})
_LITERAL = re.compile(r"^[A-Za-z0-9 _\-=:,;.@#%+~]*$")


class Unrecoverable(Exception):
    """The trajectory cannot be turned into a workspace; ``reason`` is the short cause."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class Val:
    """A path's content: ``known`` bytes, or the unknown initial content of ``base`` with
    ``ops`` applied (``("append", b)``, ``("edit", old, new)``, ``("sub", a, b, glob)``)."""

    base: str | None = None
    known: bytes | None = None
    ops: list[tuple[object, ...]] = field(default_factory=list)
    opaque: bool = False  # made or changed by a command the replay does not invert

    def copy(self) -> Val:
        return Val(self.base, self.known, list(self.ops), self.opaque)


ABSENT = None


def _norm(path: str) -> str:
    p = path
    p = p.removeprefix("/workspace/")
    while p.startswith("./"):
        p = p[2:]
    if not p or p.startswith("/") or ".." in p.split("/"):
        raise Unrecoverable("path_outside_workspace", path)
    return p.rstrip("/")


def sed_sub(data: bytes, a: bytes, b: bytes, glob: bool) -> bytes:
    """``sed 's/a/b/[g]'`` for the pattern characters :data:`_LITERAL` allows: ``.`` is
    the one regex character among them (any character), the rest match themselves, the
    replacement is literal, and without ``g`` only the first match *of each line* changes.
    The synthesized tests carry a copy of this (``TEST_HEAD``)."""
    pat = re.compile(re.escape(a).replace(rb"\.", b"."))
    return b"\n".join(pat.sub(lambda _m: b, line, count=0 if glob else 1)
                      for line in data.split(b"\n"))


def _apply(data: bytes, ops: list[tuple[object, ...]]) -> bytes | None:
    for op in ops:
        if op[0] == "append":
            data += op[1]  # type: ignore[operator]
        elif op[0] == "edit":
            old, new = op[1], op[2]
            if data.count(old) != 1:  # type: ignore[arg-type]
                return None
            data = data.replace(old, new, 1)  # type: ignore[arg-type]
        elif op[0] == "sub":
            data = sed_sub(data, op[1], op[2], bool(op[3]))  # type: ignore[arg-type]
    return data


def _undo(data: bytes, ops: list[tuple[object, ...]]) -> bytes | None:
    for op in reversed(ops):
        if op[0] == "append":
            s = op[1]
            if not data.endswith(s):  # type: ignore[arg-type]
                return None
            data = data[: len(data) - len(s)]  # type: ignore[arg-type]
        elif op[0] == "edit":
            old, new = op[1], op[2]
            if data.count(new) != 1:  # type: ignore[arg-type]
                return None
            data = data.replace(new, old, 1)  # type: ignore[arg-type]
        else:
            return None  # a substitution cannot be undone
    return data


def _observed(text: str) -> bytes | None:
    """File content from a read observation (None when it is an error or truncated)."""
    if text.startswith("[error]") or "[output truncated]" in text:
        return None
    if text == "[empty file]":
        return b""
    return text.encode() + b"\n"


@dataclass
class Recovery:
    """What replaying one trajectory established."""

    init_exists: dict[str, bool] = field(default_factory=dict)
    init_content: dict[str, bytes] = field(default_factory=dict)  # observed (exact)
    needs: dict[str, list[bytes]] = field(default_factory=dict)  # literals the fill must hold
    final: dict[str, Val | None] = field(default_factory=dict)
    final_mode: dict[str, int] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    actions: list[tuple[str, dict[str, object]]] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)  # command lines read by _opaque
    opaque_inputs: set[str] = field(default_factory=set)  # initial files they read
    scripts: set[str] = field(default_factory=set)  # initial files run by sh/bash

    def is_count(self, p: str) -> bool:
        v = self.final.get(p)
        return v is not None and v.base is None and v.known is None and not v.opaque

    def initial_files(self) -> dict[str, tuple[bytes, int, bool]]:
        """path -> (content, mode, exact): the recovered initial workspace."""
        out: dict[str, tuple[bytes, int, bool]] = {}
        for p, ex in sorted(self.init_exists.items()):
            if not ex or p in self.dirs:
                continue
            if p in self.init_content:
                data, exact = self.init_content[p], True
            else:
                lits = self.needs.get(p, [])
                data = b"".join(x + b"\n" for x in lits) if lits else \
                    f"content of {p} before the task\n".encode()
                if p in self.opaque_inputs:
                    data = opaque_fill(p, lits, script=p in self.scripts)
                exact = False
            mode = 0o644
            if p in self.final_mode:
                mode = 0o600 if self.final_mode[p] != 0o600 else 0o644
            out[p] = (data, mode, exact)
        return out

    def final_value(self, p: str) -> bytes | None:
        """The exact final content of ``p`` when the trajectory determines it."""
        v = self.final.get(p)
        if v is None:
            return None
        if v.base is None:
            return v.known
        if v.base in self.init_content:
            return _apply(self.init_content[v.base], v.ops)
        return None


def opaque_fill(p: str, lines: list[bytes], *, script: bool = False) -> bytes:
    """An initial file for a command the replay does not invert: a real archive for an
    archive name (one member), a script that runs (the needed lines, then ``true``), else
    the needed lines (``sed`` address and pattern examples) and a few rows of
    whitespace-separated fields, so field tools (``awk '{print $9}'``, ``cut``, ``sort``)
    have something to act on."""
    member = b"content of a member of " + p.encode() + b"\n"
    if p.endswith((".tar.gz", ".tgz", ".tar")):
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as t:
            info = tarfile.TarInfo("part-1.txt")
            info.size, info.mtime, info.mode = len(member), 0, 0o644
            t.addfile(info, io.BytesIO(member))
        body = raw.getvalue()
        return body if p.endswith(".tar") else gzip.compress(body, mtime=0)
    if p.endswith(".zip"):
        raw = io.BytesIO()
        with zipfile.ZipFile(raw, "w") as z:
            z.writestr(zipfile.ZipInfo("part-1.txt", (1980, 1, 1, 0, 0, 0)), member)
        return raw.getvalue()
    if p.endswith(".gz"):
        return gzip.compress(member, mtime=0)
    head = b"".join(x + b"\n" for x in lines)
    if script:
        return head + b"true\n"
    rows = b"".join(b"row%d %s alpha beta gamma delta epsilon zeta key%d value%d end\n"
                    % (i, p.rsplit("/", 1)[-1].encode(), i % 2, i) for i in range(1, 4))
    return head + rows


class Replayer:
    def __init__(self) -> None:
        self.r = Recovery()
        self.cur: dict[str, Val | None] = {}
        self.touched: set[str] = set()

    # ------------------------------------------------------------------ values
    def get(self, p: str) -> Val | None:
        if p in self.cur:
            return self.cur[p]
        return Val(base=p)

    def _exists(self, p: str) -> None:
        v = self.get(p)
        if v is None:
            raise Unrecoverable("inconsistent", f"{p} is used after it was removed")
        if v.base is not None and v.base not in self.r.init_exists:
            self.r.init_exists[v.base] = True

    def set(self, p: str, v: Val | None) -> None:
        if p not in self.cur and p not in self.r.init_exists:
            # first met by a write: a created file did not exist at the start
            self.r.init_exists[p] = False
        self.cur[p] = v
        self.touched.add(p)

    def learn(self, p: str, data: bytes) -> None:
        v = self.get(p)
        if v is None:
            return
        self._exists(p)
        if v.base is not None:
            init = _undo(data, v.ops)
            if init is not None:
                old = self.r.init_content.get(v.base)
                if old is not None and old != init:
                    raise Unrecoverable("inconsistent", f"two reads of {v.base} disagree")
                self.r.init_content[v.base] = init
        self.cur[p] = Val(known=data)

    # ------------------------------------------------------------------ tools
    def step(self, tool: str, args: dict[str, object], output: str,
             files_read: dict[str, str], files_written: dict[str, str]) -> None:
        for p, text in files_read.items():
            self.learn(_norm(p), text.encode())
        if tool == "read":
            p = _norm(str(args.get("path", "")))
            data = _observed(output)
            if data is not None:
                self.learn(p, data)
        elif tool == "write":
            p = _norm(str(args.get("path", "")))
            self.set(p, Val(known=str(args.get("content", "")).encode()))
            self.r.actions.append(("write", dict(args)))
        elif tool == "edit":
            p = _norm(str(args.get("path", "")))
            old, new = str(args.get("old", "")).encode(), str(args.get("new", "")).encode()
            if output.startswith("[error]"):
                return
            self._exists(p)
            v = self.get(p)
            assert v is not None
            v = v.copy()
            if v.base is None and v.known is not None:
                data = _apply(v.known, [("edit", old, new)])
                if data is None:
                    raise Unrecoverable("inconsistent", f"edit of {p} does not apply")
                v.known = data
            else:
                lits = self.r.needs.setdefault(v.base or p, [])
                if old not in lits:  # the fill must hold every literal the edits need
                    lits.append(old)
                v.ops.append(("edit", old, new))
            self.cur[p] = v
            self.touched.add(p)
            self.r.actions.append(("edit", dict(args)))
        elif tool == "run":
            self.run(str(args.get("cmd", "")), output)
            self.r.actions.append(("run", dict(args)))
        elif tool in ("submit",):
            return
        elif tool == "give_up":
            raise Unrecoverable("gave_up", "the trajectory gave up")
        else:
            raise Unrecoverable("unsupported_tool", tool)
        for p, text in files_written.items():
            q = _norm(p)
            if q in self.cur or q in self.r.init_exists:
                self.cur[q] = Val(known=text.encode())
            else:
                self.set(q, Val(known=text.encode()))
            self.touched.add(q)

    # ------------------------------------------------------------------ shell
    def run(self, script: str, output: str) -> None:
        for line in script.split("\n"):
            line = line.strip()
            if not line or line.startswith("#") or line in ("set -e", "set -eu"):
                continue
            saved = copy.deepcopy((self.r, self.cur, self.touched))
            try:
                self.line(line, output)
            except Unrecoverable as e:
                if e.reason != "unsupported_command":
                    raise
                self.r, self.cur, self.touched = saved
                self.opaque_line(line)

    def line(self, line: str, output: str) -> None:
        if "$(" in line or "`" in line or "<<" in line:
            raise Unrecoverable("unsupported_command", "command substitution or heredoc")
        alts = [a.strip() for a in re.split(r"\s\|\|\s", line)]
        first = alts[0]
        for part in re.split(r"\s&&\s|;\s*", first):
            if part.strip():
                self.command(part.strip(), output if len(alts) == 1 else "")

    def _origin(self, p: str) -> str | None:
        """The initial file ``p``'s current content derives from, if any."""
        v = self.get(p)
        if v is None:
            return None
        if v.base is not None:
            return v.base
        if v.opaque and v.ops and v.ops[0][0] == "from" and isinstance(v.ops[0][1], str):
            return v.ops[0][1]
        return None

    def opaque_line(self, line: str) -> None:
        """A line the replay does not invert (:mod:`._opaque`): its inputs must exist (and
        are filled so that it acts), what it writes or changes becomes opaque (tested
        against the verifier's reference run, not a computed value)."""
        from ._opaque import analyze

        t = analyze(line)
        for d in t.dirs:
            self._cmd_mkdir([d], "")
        for root, name in t.finds.items():
            under = [q for q, v in self.cur.items() if v is not None and q.startswith(root + "/")]
            known = [q for q, ex in self.r.init_exists.items() if ex and q.startswith(root + "/")]
            if not under and not known and root not in self.cur:
                t.inputs.append(f"{root}/{name}" if root != "." else name)
        for p in t.inputs + t.inplace:
            self._exists(p)
            origin = self._origin(p)
            if origin is not None and origin not in self.r.init_content:
                # an initial file never seen: filled so that the command acts on it
                self.r.opaque_inputs.add(origin)
                if p in t.scripts:
                    self.r.scripts.add(origin)
                lits = self.r.needs.setdefault(origin, [])
                lits += [x for x in t.examples.get(p, []) if x not in lits]
        for p in t.outputs + t.inplace:
            origin = self._origin(p)
            # an in-place change keeps where its content came from (("from", path)), so a
            # later "sh" of it knows which initial file must be a runnable script
            self.set(p, Val(opaque=True, ops=[("from", origin)] if p in t.inplace and
                            origin is not None else []))
        self.r.opaque.append(line)

    def command(self, cmd: str, output: str) -> None:
        m = re.fullmatch(r"wc\s+-l\s*<\s*(\S+)\s*>\s*(\S+)", cmd)
        if m:  # a line count: exact when the input is known, else "a number"
            src, dst = _norm(m[1]), _norm(m[2])
            self._exists(src)
            v = self.get(src)
            known = v.known if v is not None and v.base is None else None
            if known is None and v is not None and v.base in self.r.init_content:
                known = _apply(self.r.init_content[v.base], v.ops)
            if known is not None:
                n = known.count(b"\n")
                self.set(dst, Val(known=b"%d\n" % n))
            else:
                # the counted content as it was then (a test recounts it from $INITIAL)
                self.set(dst, Val(ops=[("count", src, v.copy() if v is not None else None)]))
            return
        if re.search(r"(?<![|])\|(?![|])", cmd) or re.search(r"(?<![0-9&])<(?!<)", cmd):
            raise Unrecoverable("unsupported_command", "pipe or input redirection")
        try:
            toks = shlex.split(cmd)
        except ValueError:
            raise Unrecoverable("unsupported_command", "unbalanced quotes") from None
        redirect: tuple[str, str] | None = None
        words: list[str] = []
        i = 0
        while i < len(toks):
            t = toks[i]
            if t in ("2>/dev/null", "2>&1", ">/dev/null", "&>/dev/null"):
                i += 1
                continue
            if t in (">", ">>") and i + 1 < len(toks):
                redirect = (t, toks[i + 1])
                i += 2
                continue
            if t.startswith((">>", ">")) and t not in (">", ">>") and not t.startswith("2>"):
                op = ">>" if t.startswith(">>") else ">"
                redirect = (op, t[len(op):])
                i += 1
                continue
            if t == "2>" and i + 1 < len(toks):
                i += 2
                continue
            words.append(t)
            i += 1
        if any(ch in w for w in words for ch in "*?") and words and words[0] != "sed":
            raise Unrecoverable("unsupported_command", "glob pattern")
        if not words:
            if redirect:  # "> f": truncate / create
                self._write(redirect, b"")
            return
        prog, args = words[0], words[1:]
        if redirect is not None and redirect[1] != "/dev/null":
            data = self._produced(prog, args)
            self._write(redirect, data)
            return
        handler = getattr(self, f"_cmd_{prog.replace('-', '_')}", None)
        if handler is not None:
            handler(args, output)
        elif prog == "cat":
            files = [a for a in args if not a.startswith("-")]
            seen = _observed(output)
            if len(files) == 1 and seen is not None:
                self.learn(_norm(files[0]), seen)
        elif prog in READ_ONLY:
            return
        else:
            raise Unrecoverable("unsupported_command", prog)

    def _produced(self, prog: str, args: list[str]) -> bytes | Val:
        if prog in (":", "true"):
            return b""
        if prog == "echo":
            nl = b"\n"
            if args and args[0] == "-n":
                nl, args = b"", args[1:]
            return " ".join(args).encode() + nl
        if prog == "printf":
            if not args:
                raise Unrecoverable("unsupported_command", "printf without a format")
            fmt, rest = args[0], args[1:]
            if "%" in fmt.replace("%%", ""):
                if fmt in ("%s", "%s\\n") and len(rest) == 1:
                    return (rest[0] + ("\n" if fmt.endswith("\\n") else "")).encode()
                raise Unrecoverable("unsupported_command", "printf with conversions")
            return fmt.replace("\\n", "\n").replace("\\t", "\t").replace("%%", "%").encode()
        if prog == "cat":
            files = [a for a in args if not a.startswith("-")]
            if len(files) == 1:
                v = self.get(_norm(files[0]))
                self._exists(_norm(files[0]))
                if v is None:
                    raise Unrecoverable("inconsistent", f"{files[0]} read after removal")
                return v.copy()
        raise Unrecoverable("unsupported_command", f"{prog} with output redirection")

    def _write(self, redirect: tuple[str, str], data: bytes | Val) -> None:
        op, target = redirect
        p = _norm(target)
        if op == ">":
            self.set(p, data.copy() if isinstance(data, Val) else Val(known=data))
            return
        if isinstance(data, Val):
            raise Unrecoverable("unsupported_command", "appending a file of unknown content")
        self._exists(p)
        v = self.get(p)
        assert v is not None
        v = v.copy()
        if v.base is None and v.known is not None:
            v.known += data
        else:
            v.ops.append(("append", data))
        self.cur[p] = v
        self.touched.add(p)

    def _cmd_mv(self, args: list[str], output: str) -> None:
        paths = [a for a in args if not a.startswith("-")]
        if len(paths) != 2:
            raise Unrecoverable("unsupported_command", "mv with more than two paths")
        a, b = _norm(paths[0]), _norm(paths[1])
        if b in self.r.dirs:
            b = f"{b}/{a.rsplit('/', 1)[-1]}"
        self._exists(a)
        v = self.get(a)
        self.set(b, v.copy() if v is not None else None)
        if a in self.r.final_mode:
            self.r.final_mode[b] = self.r.final_mode.pop(a)
        self.set(a, ABSENT)

    def _cmd_cp(self, args: list[str], output: str) -> None:
        paths = [a for a in args if not a.startswith("-")]
        if len(paths) != 2 or any(a in ("-r", "-R", "-a") for a in args):
            raise Unrecoverable("unsupported_command", "cp of folders or many files")
        a, b = _norm(paths[0]), _norm(paths[1])
        if b in self.r.dirs:
            b = f"{b}/{a.rsplit('/', 1)[-1]}"
        self._exists(a)
        v = self.get(a)
        self.set(b, v.copy() if v is not None else None)

    def _cmd_rm(self, args: list[str], output: str) -> None:
        if any(a.startswith("-") and ("r" in a or "R" in a) for a in args):
            raise Unrecoverable("unsupported_command", "recursive rm")
        force = any(a.startswith("-") and "f" in a for a in args)
        for a in args:
            if a.startswith("-"):
                continue
            p = _norm(a)
            if not force:
                self._exists(p)
            self.set(p, ABSENT)

    def _cmd_mkdir(self, args: list[str], output: str) -> None:
        for a in args:
            if not a.startswith("-"):
                p = _norm(a)
                self.r.dirs.add(p)
                parts = p.split("/")
                for i in range(1, len(parts)):
                    self.r.dirs.add("/".join(parts[:i]))

    def _cmd_touch(self, args: list[str], output: str) -> None:
        for a in args:
            if a.startswith("-"):
                continue
            p = _norm(a)
            v = self.get(p)
            if v is None or (p not in self.cur and p not in self.r.init_exists):
                self.set(p, Val(known=b""))

    def _cmd_chmod(self, args: list[str], output: str) -> None:
        if not args or args[0].startswith("-"):
            raise Unrecoverable("unsupported_command", "chmod with options")
        mode, paths = args[0], args[1:]
        for a in paths:
            p = _norm(a)
            self._exists(p)
            self.touched.add(p)
            if re.fullmatch(r"[0-7]{3,4}", mode):
                self.r.final_mode[p] = int(mode, 8)

    def _cmd_sed(self, args: list[str], output: str) -> None:
        if not args or args[0] != "-i":
            if "-i" not in args:
                return  # sed without -i only prints
            raise Unrecoverable("unsupported_command", "sed options")
        rest = [a for a in args[1:] if a != "-e"]
        if len(rest) != 2:
            raise Unrecoverable("unsupported_command", "sed with several scripts or files")
        script, target = rest
        m = re.fullmatch(r"s(.)(.*?)\1(.*?)\1(g?)", script)
        if not m or not _LITERAL.match(m[2]) or not _LITERAL.match(m[3]) or not m[2]:
            raise Unrecoverable("unsupported_command", "sed script other than a literal s///")
        a, b, glob = m[2].encode(), m[3].encode(), bool(m[4])
        p = _norm(target)
        self._exists(p)
        v = self.get(p)
        assert v is not None
        v = v.copy()
        if v.base is None and v.known is not None:
            v.known = _apply(v.known, [("sub", a, b, glob)])
        else:
            lits = self.r.needs.setdefault(v.base or p, [])
            if a not in lits:  # the fill must hold every literal the substitutions need
                lits.append(a)
            v.ops.append(("sub", a, b, glob))
        self.cur[p] = v
        self.touched.add(p)

    def _cmd_cd(self, args: list[str], output: str) -> None:
        raise Unrecoverable("unsupported_command", "cd")


def recover(traj: Traj) -> Recovery:
    """Replay ``traj``; raises :class:`Unrecoverable` with a reason."""
    rp = Replayer()
    for s in traj.steps:
        rp.step(s.tool, s.args, s.output, s.files_read, s.files_written)
    for p in rp.touched:
        rp.r.final[p] = rp.cur.get(p, rp.get(p))
    if not any(v is not None or rp.r.init_exists.get(p) for p, v in rp.r.final.items()) \
            and not rp.r.final_mode and not rp.r.opaque:
        raise Unrecoverable("no_effect", "the trajectory changed no file")
    return rp.r
