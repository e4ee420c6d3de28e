"""The demo suite: one-file operations a ~1M-parameter model can do in one ``run:`` line.

Seven templates, tagged ``demo``: create, append, copy, move, delete, replace, count. Each
card's instruction is one short templated sentence (:data:`DEMO_OPS`) and its oracle is one
command, so the episode is ``> run: <command>`` then ``> submit`` in the line protocol.
The tiny base's corpus (team train) uses the same sentence and command shapes with the
*train* name pool only; cards of the ``heldout`` variant draw names and extensions from the
disjoint held-out pool (``ceiling.envs._common.WORDS_HELDOUT`` / ``EXTS_HELDOUT``).

Variants: ``fault`` makes the command fail once (a transient PATH shim on ``cp``/``mv``/
``rm``/``sed``/``wc``) or, for create/append, whose command is the shell's own ``echo``,
leaves the target file without permissions; ``infeasible`` names a source file that does
not exist (create: a folder whose name is taken by a file that must stay; delete: the file
is listed in ``keep.txt`` as never to be deleted).

Difficulty: one level (1), horizon short. These are the easy end of ``terminal_ops``.
"""

from __future__ import annotations

import random
from typing import ClassVar

from ...cards import TaskCard
from .._common import (
    TestModule,
    ext_pool,
    finish_card,
    permission,
    pick,
    retry,
    transient,
    word_pool,
)
from .._registry import Template, Variant, register

# op -> (instruction template, oracle command template). Placeholders: {a} {b} file names,
# {w} {v} words. Team train's corpus renders the same shapes (train pool only).
DEMO_OPS: dict[str, tuple[str, str]] = {
    "create": ("Create the file {a} containing {w}.", "echo {w} > {a}"),
    "append": ("Append the line {w} to {a}.", "echo {w} >> {a}"),
    "copy": ("Copy {a} to {b}.", "cp {a} {b}"),
    "move": ("Move {a} to {b}.", "mv {a} {b}"),
    "delete": ("Delete the file {a}.", "rm {a}"),
    "replace": ("Replace {w} with {v} in {a}.", "sed -i 's/{w}/{v}/g' {a}"),
    "count": ("Count the lines of {a} into {b}.", "wc -l < {a} > {b}"),
}
# The program a transient fault targets (None: the op's command is a shell builtin, so the
# fault variant is a permission fault on the target file instead).
_FAULT_PROGRAM: dict[str, str | None] = {
    "create": None, "append": None, "copy": "cp", "move": "mv", "delete": "rm",
    "replace": "sed", "count": "wc",
}


class _DemoTemplate(Template):
    family = "terminal_ops"
    difficulties = (1,)
    horizons: ClassVar[dict[int, str]] = {1: "short"}
    tags = ("demo", "single_file")
    op: ClassVar[str]

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        words = word_pool(variant)
        exts = ext_pool(variant)
        n1, n2, w, v, filler = pick(rng, words, 5)
        a = f"{n1}.{rng.choice(exts)}"
        b = f"{n2}.{rng.choice(exts)}"
        # lines of the source file: words from the pool; the replace op needs {w} several
        # times (some lines twice, so that s/// without g is wrong) and never {v}
        pool = [x for x in words if x not in (w, v)]
        lines = [" ".join(rng.choice(pool) for _ in range(rng.randint(1, 4)))
                 for _ in range(rng.randint(2, 6))]
        if self.op == "replace":
            k = rng.randrange(len(lines))
            lines[k] = f"{w} {lines[k]} {w}"
            j = rng.randrange(len(lines))
            lines[j] = f"{lines[j]} {w}"
        src = "".join(ln + "\n" for ln in lines)
        other = f"{filler}.{rng.choice(exts)}"
        workspace: dict[str, str] = {other: "keep me\n"}
        instr, cmd = DEMO_OPS[self.op]
        fmt = {"a": a, "b": b, "w": w, "v": v}
        tm = TestModule()
        reason = None
        faults = []
        prog = _FAULT_PROGRAM[self.op]
        if variant == "fault":
            faults = [transient(prog)] if prog else [permission(a)]
        command = cmd.format(**fmt)
        solution = [retry(command)] if variant == "fault" and prog else [command]
        if variant == "fault" and not prog:
            solution = [f"chmod 644 {a}", command]
        op = self.op
        # One test per card, and every assertion about what must stay is folded into it:
        # the reward is the pass rate, so no test may pass on the untouched workspace.
        kept = f"assert read_regular({other!r}) == 'keep me' + chr(10)"
        if variant == "fault" and not prog:
            kept += f"\nassert regular_file({a!r}).stat().st_mode & 0o600 == 0o600"
        if op == "create":
            if variant == "fault":
                workspace[a] = "stale\n"
            if variant == "infeasible":
                # the folder would have to replace a file that must stay as it is
                workspace[n2] = "do not touch\n"
                a = f"{n2}/{a}"
                fmt["a"] = a
                instr = "Create the file {a} containing {w}. Keep the file " + n2 + " unchanged."
                reason = f"{n2} is a file that must stay unchanged, so the folder {n2}/ cannot exist"
                kept += f"\nassert read_regular({n2!r}) == 'do not touch' + chr(10)"
            tm.add("created", f"text = read_regular({a!r})\n"
                              f"assert text.strip() == {w!r} and text.count(chr(10)) <= 1\n{kept}")
        elif op == "append":
            workspace[a] = src
            tm.add("appended", f"text = read_regular({a!r})\n"
                               f"assert text.rstrip(chr(10)) == {src + w!r}\n{kept}")
        elif op == "copy":
            workspace[a] = src
            tm.add("copied", f"assert read_regular({b!r}) == {src!r}\n"
                             f"assert read_regular({a!r}) == {src!r}\n{kept}")
        elif op == "move":
            workspace[a] = src
            tm.add("moved", f"assert read_regular({b!r}) == {src!r}\n"
                            f"assert absent({a!r})\n{kept}")
        elif op == "delete":
            workspace[a] = src
            tm.add("deleted", f"assert absent({a!r})\n{kept}")
        elif op == "replace":
            workspace[a] = src
            tm.add("replaced", f"assert read_regular({a!r}) == {src.replace(w, v)!r}\n{kept}")
        elif op == "count":
            workspace[a] = src
            tm.add("counted", f"assert read_regular({b!r}).strip() == {str(len(lines))!r}\n"
                              f"assert read_regular({a!r}) == {src!r}\n{kept}")
        if variant == "infeasible" and op == "delete":
            # a genuine conflict: the file to delete is one that must never be deleted
            workspace["keep.txt"] = f"{a}\n"
            instr = instr + " Never delete a file listed in keep.txt."
            reason = f"{a} is listed in keep.txt, so it must not be deleted"
        elif variant == "infeasible" and op != "create":
            workspace.pop(a, None)
            reason = f"the file {a} does not exist"
        return finish_card(type(self), variant=variant, instruction=instr.format(**fmt),
                           workspace=workspace, tests=tm, solution=solution, faults=faults,
                           infeasible_reason=reason, tags=(op,))


def _make(op: str, summary: str) -> type[_DemoTemplate]:
    cls = type(f"Demo{op.title()}", (_DemoTemplate,), {
        "name": f"demo-{op}", "op": op, "summary": summary, "__module__": __name__,
        "__doc__": f"Demo: {summary} (one command, then submit).",
    })
    return register(cls)  # type: ignore[return-value]


DemoCreate = _make("create", "create a file with one word in it")
DemoAppend = _make("append", "append one line to a file")
DemoCopy = _make("copy", "copy a file")
DemoMove = _make("move", "move (rename) a file")
DemoDelete = _make("delete", "delete a file")
DemoReplace = _make("replace", "replace every occurrence of a word in a file (sed -i)")
DemoCount = _make("count", "write a file's line count into another file")

DEMO_TEMPLATES = (DemoCreate, DemoAppend, DemoCopy, DemoMove, DemoDelete, DemoReplace, DemoCount)
