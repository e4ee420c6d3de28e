"""The pre-training corpus of ``builtin:tiny``: synthetic single-file shell episodes.

The corpus teaches the *line protocol* (contracts.md) and the vocabulary of the demo tasks
(create, append, copy, move, delete, replace, count) so that the base can act on the
``terminal_ops`` demo cards — without ever generating from those cards or their oracles:
every episode here comes from this module's own generator, with names drawn from the
train name pool only (never the held-out pool).

A *capable but unactivated* base needs a stochastic policy on the task, so with
probability ``noise`` the episode shows a plausible but wrong decision: a command that
exits 0 and leaves the task undone (``>`` for ``>>``, ``mv`` for ``cp``, ``s///`` without
``g``, ``wc -l f`` for ``wc -l < f`` ...), or ``submit`` where it should give up. Other
shapes: a missing input (the command fails with the real coreutils/dash message and the
agent gives up: abstention), a guard list to read first (``keep.txt``), a permission
fault (``chmod`` then retry), a transient failure (retry) and a look around (``ls``).

The *multistep* corpus (``builtin:tiny-multistep``, :func:`generate_multistep`) chains 2-4
of the same operations in one episode, the way the ``multistep`` demo cards do: the
instruction is their sentences in order and each turn is one command. Noise is per step
(a wrong command), plus skipped steps and early submits: the errors a chain invites.
It never calls the card generators either.

Episodes are rendered with the harness's own renderer
(``ceiling.harness.render_line_episode``), so corpus and run-time prompts are byte-identical.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

# Only the train name pool of the environments (never the held-out one).
from ..envs import EXTS_TRAIN as TRAIN_EXTS
from ..envs import WORDS_TRAIN as TRAIN_WORDS

KINDS: tuple[str, ...] = ("create", "append", "copy", "move", "delete", "replace", "count")
# Sentence shapes per kind; the first is the demo templates' own shape (used 85 % of the time).
PHRASES: dict[str, tuple[str, ...]] = {
    "create": ("Create the file {a} containing {w}.", "Create {a} containing {w}.",
               "Write {w} to a new file {a}."),
    "append": ("Append the line {w} to {a}.", "Append {w} to the file {a}.",
               "Add the line {w} to the end of {a}."),
    "copy": ("Copy {a} to {b}.", "Copy the file {a} to {b}.", "Make a copy of {a} named {b}."),
    "move": ("Move {a} to {b}.", "Rename {a} to {b}.", "Move the file {a} to {b}."),
    "delete": ("Delete the file {a}.", "Remove the file {a}.", "Delete {a}."),
    "replace": ("Replace {w} with {v} in {a}.", "Replace every {w} with {v} in {a}.",
                "In the file {a}, replace {w} with {v}."),
    "count": ("Count the lines of {a} into {b}.", "Write the number of lines in {a} to {b}.",
              "Count the lines of {a} and write the number to {b}."),
}
COMMANDS: dict[str, str] = {
    "create": "echo {w} > {a}", "append": "echo {w} >> {a}", "copy": "cp {a} {b}",
    "move": "mv {a} {b}", "delete": "rm {a}", "replace": "sed -i 's/{w}/{v}/g' {a}",
    "count": "wc -l < {a} > {b}",
}
# Plausible but wrong: each exits 0 and leaves the task undone.
WRONG: dict[str, tuple[str, ...]] = {
    "create": ("touch {a}", "echo {a} > {w}", "echo {a} > {a}", "echo {w} > {w}"),
    "append": ("echo {w} > {a}", "touch {a}", "echo {a} >> {a}"),
    "copy": ("mv {a} {b}", "cp {a} {a}.bak", "touch {b}"),
    "move": ("cp {a} {b}", "touch {b}", "mv {a} {a}.old"),
    "delete": ("truncate -s 0 {a}", "touch {a}", "rm -f {a}.bak"),
    "replace": ("sed -i 's/{v}/{w}/g' {a}", "sed -i 's/{w}//g' {a}", "sed -i 's/{w}/{v}/' {a}"),
    "count": ("wc -l {a} > {b}", "wc -c < {a} > {b}", "wc -l < {a} > {a}.count"),
}
# What coreutils / dash print when the input is missing (exit code, stderr).
MISSING_ERRORS: dict[str, tuple[int, str]] = {
    "copy": (1, "cp: cannot stat '{a}': No such file or directory"),
    "move": (1, "mv: cannot stat '{a}': No such file or directory"),
    "delete": (1, "rm: cannot remove '{a}': No such file or directory"),
    "replace": (2, "sed: can't read {a}: No such file or directory"),
    "count": (2, "sh: 1: cannot open {a}: No such file"),
}
TRANSIENT = "{p}: temporary failure (resource busy), try again"


@dataclass
class Episode:
    """One corpus episode: the task, the turns, and the line a correct agent writes first."""

    kind: str
    instruction: str
    turns: list[tuple[str, str]]  # (action line, observation text; "" for an ending action)
    correct: str  # the correct first action line ("give_up: ..." for a missing input)
    shape: str = "plain"  # plain | wrong | missing | guard | permission | transient | look
    files: list[str] = field(default_factory=list)


def format_observation(stdout: str = "", stderr: str = "", exit_code: int = 0) -> str:
    """The observation *body* of a ``run`` result, exactly as the harness formats it."""
    from ..harness import format_observation as fmt
    from ..sandbox import ExecResult

    return fmt(ExecResult(exit_code, stdout, stderr, 0.0))


def render_episode(instruction: str, turns: Sequence[tuple[str, str]]) -> str:
    """An episode's text with the harness's own renderer (the formats must be identical)."""
    from ..harness import render_line_episode

    return render_line_episode(instruction, turns)


def _names(rng: random.Random, words: Sequence[str], exts: Sequence[str]) -> dict[str, str]:
    n1, n2, w, v = rng.sample(list(words), 4)
    return {"a": f"{n1}.{rng.choice(exts)}", "b": f"{n2}.{rng.choice(exts)}", "w": w, "v": v,
            "d": n2}


def make_episode(rng: random.Random, *, noise: float = 0.5, p_missing: float = 0.08,
                 p_transient: float = 0.05, p_look: float = 0.05, p_guard: float = 0.15,
                 words: Sequence[str] = TRAIN_WORDS, exts: Sequence[str] = TRAIN_EXTS,
                 kinds: Sequence[str] = KINDS) -> Episode:
    """One random episode. ``noise`` is the chance the shown decision is a wrong one."""
    kind = rng.choice(kinds)
    f = _names(rng, words, exts)
    phrases = PHRASES[kind]
    ins = (phrases[0] if rng.random() < 0.85 else rng.choice(phrases[1:])).format(**f)
    correct = COMMANDS[kind].format(**f)
    wrong = rng.random() < noise
    u = rng.random()
    turns: list[tuple[str, str]] = []
    if u < p_missing:  # the input is missing: the command fails, the right move is give_up
        if kind in MISSING_ERRORS:
            code, err = MISSING_ERRORS[kind]
            reason = f"the file {f['a']} does not exist"
            obs = format_observation(stderr=err.format(**f), exit_code=code)
        elif kind == "create":  # a folder that cannot exist because a kept file has its name
            f["a"] = f"{f['d']}/{f['a']}"
            ins = PHRASES[kind][0].format(**f) + f" Keep the file {f['d']} unchanged."
            correct = COMMANDS[kind].format(**f)
            reason = f"{f['d']} is a file that must stay unchanged"
            obs = format_observation(
                stderr=f"sh: 1: cannot create {f['a']}: Directory nonexistent", exit_code=2)
        else:  # append: permission denied, repaired with chmod (a fault, not a missing input)
            obs = format_observation(stderr=f"sh: 1: cannot create {f['a']}: Permission denied",
                                     exit_code=2)
            turns = [(f"run: {correct}", obs), (f"run: chmod 644 {f['a']}", format_observation()),
                     (f"run: {correct}", format_observation()), ("submit", "")]
            return Episode(kind, ins, turns, f"run: {correct}", "permission", [f["a"]])
        end = ("submit", "") if wrong else (f"give_up: {reason}", "")
        return Episode(kind, ins, [(f"run: {correct}", obs), end], f"run: {correct}", "missing")
    if kind == "delete" and rng.random() < p_guard:  # a guard list to read first
        ins = ins + " Never delete a file listed in keep.txt."
        listed = rng.random() < 0.5
        other = f"{rng.choice(words)}.{rng.choice(exts)}"
        keep = f["a"] if listed else other
        turns = [("run: cat keep.txt", format_observation(stdout=keep))]
        if listed:
            end = ("submit", "") if wrong else (f"give_up: {f['a']} is listed in keep.txt", "")
            return Episode(kind, ins, [*turns, end], "run: cat keep.txt", "guard")
        cmd = rng.choice(WRONG[kind]).format(**f) if wrong else correct
        turns += [(f"run: {cmd}", format_observation()), ("submit", "")]
        return Episode(kind, ins, turns, "run: cat keep.txt", "guard")
    u -= p_missing
    cmd = rng.choice(WRONG[kind]).format(**f) if wrong else correct
    shape = "wrong" if wrong else "plain"
    if u < p_look:
        inputs = [f"{rng.choice(words)}.{rng.choice(exts)}"]
        inputs += [] if kind == "create" else [f["a"]]
        turns.append(("run: ls", format_observation(stdout="\n".join(sorted(inputs)))))
        shape = "look"
    elif u < p_look + p_transient and kind not in ("create", "append"):
        prog = cmd.split()[0]
        turns.append((f"run: {cmd}", format_observation(stderr=TRANSIENT.format(p=prog),
                                                         exit_code=1)))
        shape = "transient"
    turns.append((f"run: {cmd}", format_observation()))
    turns.append(("submit", ""))
    return Episode(kind, ins, turns, f"run: {correct}", shape)


MULTI_FIRST: tuple[str, ...] = ("create", "append", "replace", "copy", "move")


def multistep_steps(rng: random.Random, n_ops: int, words: Sequence[str] = TRAIN_WORDS,
                    exts: Sequence[str] = TRAIN_EXTS) -> list[tuple[str, dict[str, str]]]:
    """A chain of ``n_ops`` (kind, names): it starts with one of :data:`MULTI_FIRST`; later
    steps act on the file the chain works on (created / copied to / moved to), count its
    lines into a new file or delete a stale one; consecutive kinds differ."""
    pool = list(words)
    rng.shuffle(pool)
    it = iter(pool)

    def fresh() -> str:
        return f"{next(it)}.{rng.choice(exts)}"

    cur, stale = fresh(), fresh()
    stale_there = True
    out: list[tuple[str, dict[str, str]]] = []
    prev = ""
    for i in range(n_ops):
        opts = list(MULTI_FIRST) if i == 0 else [
            k for k in KINDS if k not in (prev, "create") and (k != "delete" or stale_there)]
        kind = rng.choice(opts)
        if kind == "create":
            f = {"a": fresh(), "w": next(it)}
            cur = f["a"]
        elif kind == "append":
            f = {"a": cur, "w": next(it)}
        elif kind == "replace":
            f = {"a": cur, "w": next(it), "v": next(it)}
        elif kind in ("copy", "move", "count"):
            f = {"a": cur, "b": fresh()}
            cur = f["b"] if kind != "count" else cur
        else:
            f = {"a": stale}
            stale_there = False
        out.append((kind, f))
        prev = kind
    return out


def make_multistep_episode(rng: random.Random, *, n_ops: int | None = None,
                           noise: float = 0.35, p_skip: float = 0.05, p_early: float = 0.05,
                           p_alt: float = 0.15, words: Sequence[str] = TRAIN_WORDS,
                           exts: Sequence[str] = TRAIN_EXTS) -> Episode:
    """One chained episode (2-4 steps unless ``n_ops``); ``noise`` per step is the chance
    of a wrong command, ``p_skip`` of leaving a middle step out, ``p_early`` of submitting
    before the last step; ``p_alt`` per sentence of another phrasing."""
    steps = multistep_steps(rng, n_ops or rng.randint(2, 4), words, exts)
    ins = " ".join((PHRASES[k][0] if rng.random() >= p_alt else rng.choice(PHRASES[k][1:]))
                   .format(**f) for k, f in steps)
    todo = list(steps)
    shape = "multistep"
    if len(todo) > 2 and rng.random() < p_skip:
        del todo[rng.randrange(1, len(todo) - 1)]
        shape = "multistep-skip"
    elif len(todo) > 1 and rng.random() < p_early:
        todo = todo[:rng.randrange(1, len(todo))]
        shape = "multistep-early"
    turns: list[tuple[str, str]] = []
    for k, f in todo:
        wrong = rng.random() < noise
        cmd = rng.choice(WRONG[k]).format(**f) if wrong else COMMANDS[k].format(**f)
        shape = "multistep-wrong" if wrong and shape == "multistep" else shape
        turns.append((f"run: {cmd}", format_observation()))
    turns.append(("submit", ""))
    k0, f0 = steps[0]
    return Episode(k0, ins, turns, f"run: {COMMANDS[k0].format(**f0)}", shape,
                   [f.get("b", f["a"]) for _, f in steps])


def generate(n: int, seed: int, **kw: object) -> list[Episode]:
    """``n`` episodes, deterministic in ``seed`` (keyword arguments go to make_episode)."""
    rng = random.Random(f"ceiling-tiny-corpus|{seed}")
    return [make_episode(rng, **kw) for _ in range(n)]  # type: ignore[arg-type]


def generate_multistep(n: int, seed: int, *, single: float = 0.25, noise: float = 0.5,
                       step_noise: float = 0.35) -> list[Episode]:
    """The multistep corpus: ``single`` of the episodes are :func:`make_episode` ones (the
    one-command shapes, abstention and faults included, at ``noise``), the rest chains of
    2-4 steps (:func:`make_multistep_episode` at ``step_noise``); deterministic in seed."""
    rng = random.Random(f"ceiling-tiny-multistep-corpus|{seed}")
    return [make_episode(rng, noise=noise) if rng.random() < single
            else make_multistep_episode(rng, noise=step_noise) for _ in range(n)]


def render(episodes: Sequence[Episode]) -> list[str]:
    """Each episode's full text in the line protocol."""
    return [render_episode(e.instruction, e.turns) for e in episodes]


def prompt_of(instruction: str) -> str:
    """The first-turn prompt the harness sends for a task: ``task: ...`` then ``> ``."""
    return render_episode(instruction, [])
