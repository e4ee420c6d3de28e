"""The multistep demo suite: 2-4 demo operations chained in one task.

Three templates, tagged ``multistep`` (never ``demo``: the one-command suite stays as it
is): ``multistep-two``, ``-three`` and ``-four`` chain that many operations. A chain starts
by creating a file or by appending to, editing, copying or moving the workspace's source
file; the later operations act on the file the chain is working on (the one just created,
copied to or moved to), can count its lines into a new file, or delete a stale file.
The instruction is the demo sentences (:data:`~._demo.DEMO_OPS`) joined in order, e.g.
"Copy fox.txt to owl.md. Replace cat with dog in owl.md. Count the lines of owl.md into
sun.log."; the oracle is one demo command per sentence, then ``submit``.

One difficulty per template (the length is the template): 3 to 5 oracle calls with the
submit, so every card is ``short``. A 1M-parameter base cannot hold a medium horizon of 10+
calls, so none is offered here.

Grading: the expected final workspace is computed by simulating the chain on the files
(``sed s/w/v/g`` on a literal word is Python's ``str.replace``; ``wc -l < f`` prints the
newline count). One hidden test per path the chain changes (created, rewritten or removed),
and every assertion about what must stay is folded into each, so no test passes on the
untouched workspace and the reward (the share of tests passed) gives credit per step done.

Variants: ``heldout`` draws names and extensions from the held-out pools; ``fault`` makes
the first ``cp``/``mv``/``rm``/``sed``/``wc`` of the chain fail once (the oracle retries it);
``infeasible`` has a step delete a file that ``keep.txt`` lists as never to be deleted
(the right move is ``give_up``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import ClassVar

from ...cards import TaskCard
from .._common import TestModule, ext_pool, finish_card, retry, transient, word_pool
from .._registry import Template, Variant, register
from ._demo import _FAULT_PROGRAM, DEMO_OPS

MULTISTEP_OPS = DEMO_OPS
FIRST_OPS = ("create", "append", "replace", "copy", "move")  # how a chain may start


@dataclass
class Step:
    """One operation of a chain: the op and the names filling its sentence and command."""

    op: str
    names: dict[str, str]

    @property
    def instruction(self) -> str:
        return MULTISTEP_OPS[self.op][0].format(**self.names)

    @property
    def command(self) -> str:
        return MULTISTEP_OPS[self.op][1].format(**self.names)


@dataclass
class Chain:
    """A generated chain: the starting files, the steps, and the simulated end state."""

    start: dict[str, str]
    steps: list[Step] = field(default_factory=list)
    end: dict[str, str] = field(default_factory=dict)
    counted: set[str] = field(default_factory=set)  # files holding a line count


def apply(fs: dict[str, str], step: Step) -> None:
    """Simulate one demo operation on an in-memory workspace (path -> text)."""
    n = step.names
    if step.op == "create":
        fs[n["a"]] = n["w"] + "\n"
    elif step.op == "append":
        fs[n["a"]] += n["w"] + "\n"
    elif step.op == "replace":
        fs[n["a"]] = fs[n["a"]].replace(n["w"], n["v"])
    elif step.op == "copy":
        fs[n["b"]] = fs[n["a"]]
    elif step.op == "move":
        fs[n["b"]] = fs.pop(n["a"])
    elif step.op == "delete":
        del fs[n["a"]]
    elif step.op == "count":
        fs[n["b"]] = f"{fs[n['a']].count(chr(10))}\n"
    else:  # pragma: no cover - ops come from MULTISTEP_OPS
        raise ValueError(f"unknown op {step.op!r}")


def make_chain(rng: random.Random, words: tuple[str, ...], exts: tuple[str, ...], n_ops: int,
               first: tuple[str, ...] = FIRST_OPS, *, need_program: bool = False,
               need_delete: bool = False) -> Chain:
    """A random chain of ``n_ops`` operations whose first op is one of ``first``.

    The workspace starts with a source file, a stale file (a delete target) and a file
    that must stay as it is. Consecutive ops differ; every step changes the workspace.
    ``need_program``: some op runs a program a transient fault can target;
    ``need_delete``: some op deletes the stale file."""
    for _ in range(200):
        ch = _try_chain(rng, words, exts, n_ops, first)
        ops = [s.op for s in ch.steps]
        if need_program and not any(_FAULT_PROGRAM[o] for o in ops):
            continue
        if need_delete and "delete" not in ops:
            continue
        if ch.end != ch.start:
            return ch
    raise RuntimeError("could not draw a chain with these constraints")  # pragma: no cover


def _try_chain(rng: random.Random, words: tuple[str, ...], exts: tuple[str, ...], n_ops: int,
               first: tuple[str, ...]) -> Chain:
    pool = list(words)
    rng.shuffle(pool)
    names = iter(pool)

    def fresh_file() -> str:
        return f"{next(names)}.{rng.choice(exts)}"

    def lines(k: int) -> str:
        return "".join(" ".join(rng.choice(words) for _ in range(rng.randint(1, 3))) + "\n"
                       for _ in range(k))

    src, stale, kept = fresh_file(), fresh_file(), fresh_file()
    start = {src: lines(rng.randint(2, 5)), stale: lines(rng.randint(1, 3)), kept: "keep me\n"}
    ch = Chain(start=dict(start))
    fs = dict(start)
    cur = src
    prev = ""
    for i in range(n_ops):
        if i == 0:
            options = list(first)
        else:
            options = [o for o in MULTISTEP_OPS if o not in (prev, "create")
                       and (o != "delete" or stale in fs)]
        op = rng.choice(options)
        if op == "create":
            step = Step(op, {"a": fresh_file(), "w": next(names)})
        elif op == "append":
            step = Step(op, {"a": cur, "w": next(names)})
        elif op == "replace":
            present = sorted({w for w in fs[cur].split() if w in words})
            w = rng.choice(present)
            v = next(x for x in names if x not in fs[cur])
            step = Step(op, {"a": cur, "w": w, "v": v})
        elif op in ("copy", "move", "count"):
            step = Step(op, {"a": cur, "b": fresh_file()})
        else:  # delete
            step = Step(op, {"a": stale})
        apply(fs, step)
        if op == "count":
            ch.counted.add(step.names["b"])
        if op in ("create", "copy", "move"):
            cur = step.names["a" if op == "create" else "b"]
        ch.steps.append(step)
        prev = op
    ch.end = fs
    return ch


def _assert_file(path: str, text: str, counted: bool) -> str:
    if counted:  # wc's number, whitespace aside
        return f"assert read_regular({path!r}).strip() == {text.strip()!r}"
    return f"assert read_regular({path!r}) == {text!r}"


def chain_tests(ch: Chain, workspace: dict[str, str]) -> TestModule:
    """One test per changed path; the paths that must stay are checked in every test."""
    tm = TestModule()
    paths = sorted(set(workspace) | set(ch.end))
    same = [p for p in paths if p in workspace and ch.end.get(p) == workspace[p]]
    keep = "\n".join(_assert_file(p, workspace[p], False) for p in same)
    for k, p in enumerate(q for q in paths if q not in same):
        body = (f"assert absent({p!r})" if p not in ch.end
                else _assert_file(p, ch.end[p], p in ch.counted))
        tm.add(f"step_{k}", body + ("\n" + keep if keep else ""))
    return tm


class _MultistepTemplate(Template):
    family = "terminal_ops"
    difficulties = (1,)
    horizons: ClassVar[dict[int, str]] = {1: "short"}
    tags = ("multistep", "single_file")
    n_ops: ClassVar[int]

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        words, exts = word_pool(variant), ext_pool(variant)
        infeasible = variant == "infeasible"
        ch = make_chain(rng, words, exts, self.n_ops, FIRST_OPS,
                        need_program=variant == "fault", need_delete=infeasible)
        workspace = dict(ch.start)
        tm = chain_tests(ch, workspace)
        instruction = " ".join(s.instruction for s in ch.steps)
        solution = [s.command for s in ch.steps]
        faults = []
        reason = None
        if variant == "fault":
            k = next(i for i, s in enumerate(ch.steps) if _FAULT_PROGRAM[s.op])
            prog = _FAULT_PROGRAM[ch.steps[k].op]
            assert prog is not None
            faults = [transient(prog)]
            solution[k] = retry(solution[k])
        if infeasible:  # a genuine conflict: a step deletes a file that must never be deleted
            stale = next(s.names["a"] for s in ch.steps if s.op == "delete")
            workspace["keep.txt"] = f"{stale}\n"
            instruction += " Never delete a file listed in keep.txt."
            reason = f"{stale} is listed in keep.txt, so it must not be deleted"
        return finish_card(type(self), variant=variant, instruction=instruction,
                           workspace=workspace, tests=tm, solution=solution, faults=faults,
                           infeasible_reason=reason,
                           tags=sorted({s.op for s in ch.steps}))


def _make(n: int, word: str) -> type[_MultistepTemplate]:
    summary = f"{n} demo operations chained on a file"
    cls = type(f"Multistep{word.title()}", (_MultistepTemplate,), {
        "name": f"multistep-{word}", "n_ops": n, "summary": summary, "__module__": __name__,
        "__doc__": f"Multistep: {summary} ({n} commands, then submit).",
    })
    return register(cls)  # type: ignore[return-value]


MultistepTwo = _make(2, "two")
MultistepThree = _make(3, "three")
MultistepFour = _make(4, "four")

MULTISTEP_TEMPLATES = (MultistepTwo, MultistepThree, MultistepFour)
