"""Helpers shared by every environment family's templates.

What lives here, so that each family's generators stay short and alike:

- **name pools**: short words and file extensions, split into a ``train`` pool and a
  disjoint ``heldout`` pool (a held-out card never shows a name the train split uses);
- **random content**: lines of words, CSV rows, numbers;
- :class:`TestModule`: builds a hidden pytest file whose tests read the workspace through
  ``os.environ["WORKSPACE"]`` (never a hard-coded path; files as regular files, so a symlink
  never passes for a copy) and knows its exact node ids;
- :func:`finish_card`: turns (instruction, files, oracle lines, tests, faults) into a valid
  :class:`~ceiling.cards.TaskCard` whose horizon and budget follow from the oracle's length.

Oracle convention (what :func:`finish_card` assumes and checks): ``solution`` is a list of
shell lines, each one complete on its own (no ``cd`` that later lines rely on, no multi-line
constructs), so a scripted agent may run them one ``run`` step at a time or all at once
with ``sh``. The oracle's step count is ``len(lines) + 1`` (the final ``submit``).

This module is a stable seam: other families import it. Add, never rename.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..cards import Acceptance, Budget, Fault, FileEntry, TaskCard, horizon_for_steps

if TYPE_CHECKING:
    from ._registry import Template

# ---------------------------------------------------------------------------------------
# Name pools. Single short lowercase words: a tiny model must be able to copy them.
# The heldout pool is disjoint from the train pool (checked at import time).

WORDS_TRAIN: tuple[str, ...] = (
    "fox", "owl", "cat", "dog", "bee", "ant", "elk", "yak", "cod", "eel",
    "hen", "ram", "bat", "emu", "gnu", "jay", "koi", "pig", "rat", "ape",
    "red", "tan", "sky", "sun", "moon", "star", "rain", "snow", "wind", "leaf",
    "tree", "rock", "sand", "lake", "hill", "road", "boat", "ship", "car", "bus",
    "box", "cup", "pen", "ink", "map", "key", "bell", "coin", "ring", "lamp",
    "note", "page", "book", "card", "tape", "disk", "file", "data", "list", "item",
    "blue", "gold", "mint", "plum", "pear", "lime", "corn", "rice", "salt", "milk",
    "cake", "soup", "tea", "jam", "nut", "egg", "bun", "pie", "fig", "oat",
    "alpha", "beta", "gamma", "delta", "omega", "zeta", "sigma", "kappa", "theta", "iota",
    "north", "south", "east", "west", "hello", "world", "green", "black", "white", "stone",
)
WORDS_HELDOUT: tuple[str, ...] = (
    "otter", "lynx", "crane", "heron", "finch", "viper", "bison", "moose", "raven", "wren",
    "ember", "frost", "cedar", "maple", "birch", "coral", "amber", "ivory", "onyx", "jade",
    "quartz", "prism", "orbit", "comet", "nova", "pixel", "vector", "kernel", "socket", "buffer",
)
EXTS_TRAIN: tuple[str, ...] = ("txt", "log", "md", "csv", "cfg")
EXTS_HELDOUT: tuple[str, ...] = ("dat", "ini", "rst")

assert not set(WORDS_TRAIN) & set(WORDS_HELDOUT), "name pools must be disjoint"
assert not set(EXTS_TRAIN) & set(EXTS_HELDOUT), "extension pools must be disjoint"
assert len(set(WORDS_TRAIN)) == len(WORDS_TRAIN) and len(set(WORDS_HELDOUT)) == len(WORDS_HELDOUT)


def word_pool(variant: str) -> tuple[str, ...]:
    """The word pool for a variant: the held-out pool for ``heldout``, else the train pool."""
    return WORDS_HELDOUT if variant == "heldout" else WORDS_TRAIN


def ext_pool(variant: str) -> tuple[str, ...]:
    """The extension pool for a variant (held-out extensions only on ``heldout``)."""
    return EXTS_HELDOUT if variant == "heldout" else EXTS_TRAIN


def pick(rng: random.Random, pool: Sequence[str], k: int) -> list[str]:
    """``k`` distinct items of ``pool`` in random order (``k`` may not exceed the pool)."""
    if k > len(pool):
        raise ValueError(f"asked for {k} distinct names from a pool of {len(pool)}")
    return rng.sample(list(pool), k)


def unique_names(rng: random.Random, pool: Sequence[str], k: int, *, sep: str = "-") -> list[str]:
    """``k`` distinct names built from ``pool``: single words while they last, then
    ``word{sep}word`` pairs. Deterministic for a given rng state."""
    names = pick(rng, pool, min(k, len(pool)))
    seen = set(names)
    while len(names) < k:
        cand = f"{rng.choice(pool)}{sep}{rng.choice(pool)}"
        if cand not in seen:
            seen.add(cand)
            names.append(cand)
    return names


def text_lines(rng: random.Random, n: int, pool: Sequence[str] = WORDS_TRAIN, *,
               words: tuple[int, int] = (2, 6)) -> list[str]:
    """``n`` lines of random words from ``pool`` (each line ``words`` long, inclusive)."""
    return [" ".join(rng.choice(pool) for _ in range(rng.randint(*words))) for _ in range(n)]


def text_block(rng: random.Random, n: int, pool: Sequence[str] = WORDS_TRAIN) -> str:
    """``n`` random lines joined with newlines, ending with one."""
    return "".join(line + "\n" for line in text_lines(rng, n, pool))


def shq(s: str) -> str:
    """Quote one shell word (``shlex.quote``)."""
    return shlex.quote(s)


# ---------------------------------------------------------------------------------------
# Hidden tests.

TEST_HEADER = '''"""Hidden acceptance tests (generated; the grader runs them outside the sandbox)."""
import os
import stat
from pathlib import Path

WS = Path(os.environ["WORKSPACE"])


def regular_file(rel):
    """WS / rel, checked to be a regular file with a single link, reached through no
    symlinked folder: a symlink or a hard link to another file is not a copy of it."""
    parent = WS
    for part in Path(rel).parts[:-1]:
        parent = parent / part
        assert not parent.is_symlink(), f"{parent.relative_to(WS)} is a symlink"
    st = os.lstat(WS / rel)
    assert stat.S_ISREG(st.st_mode), f"{rel} is not a regular file"
    assert st.st_nlink == 1, f"{rel} is a hard link"
    return WS / rel


def read_regular(rel):
    """The text of a regular workspace file (see regular_file)."""
    return regular_file(rel).read_text()


def absent(rel):
    """Nothing at all is at WS / rel: no file, no folder, no symlink (dangling or not)."""
    return not os.path.lexists(WS / rel)

'''


@dataclass
class TestModule:
    """A hidden pytest file built test by test.

    ``add("rotated", "assert read_regular('a.log.1') == TEXT")`` appends ``def
    test_rotated():`` with that body. ``WS`` (the workspace, from ``os.environ["WORKSPACE"]``),
    ``os``, ``stat``, ``Path``, ``regular_file``/``read_regular`` (a regular file, not a symlink
    or hard link) and ``absent`` (nothing there, not even a dangling symlink) are in scope;
    ``helpers`` is extra module-level code placed after the header. A test that takes a
    ``subject`` argument gets the grader's subject fixture (``runner="subject"``).
    Embed data with ``repr()`` so the file stays valid Python whatever the content.
    """

    __test__ = False  # not a pytest class, despite the name

    filename: str = "test_task.py"
    helpers: str = ""
    _tests: list[tuple[str, str]] = field(default_factory=list)
    _subject: set[str] = field(default_factory=set)

    def add(self, name: str, body: str, *, subject: bool = False) -> TestModule:
        """Append ``test_<name>``; ``subject=True`` gives it the grader's ``subject`` fixture
        (the card's runner must then be ``subject``)."""
        if not name.isidentifier() or any(n == name for n, _ in self._tests):
            raise ValueError(f"test name {name!r} is not a fresh identifier")
        self._tests.append((name, body))
        if subject:
            self._subject.add(name)
        return self

    @property
    def ids(self) -> list[str]:
        """The pytest node ids, in order (``test_task.py::test_rotated``)."""
        return [f"{self.filename}::test_{n}" for n, _ in self._tests]

    @property
    def source(self) -> str:
        parts = [TEST_HEADER]
        if self.helpers:
            parts.append(self.helpers.strip("\n") + "\n\n")
        for name, body in self._tests:
            lines = body.strip("\n").splitlines() or ["pass"]
            arg = "subject" if name in self._subject else ""
            parts.append(f"\n\ndef test_{name}({arg}):\n" + "".join(f"    {ln}\n" for ln in lines))
        return "".join(parts)


# ---------------------------------------------------------------------------------------
# Faults.

def transient(program: str, times: int = 1) -> Fault:
    """The first ``times`` calls of ``program`` fail (a PATH shim), then it works."""
    return Fault(kind="transient", target=program, times=times,
                 message=f"{program}: temporary failure (resource busy), try again")


def permission(path: str) -> Fault:
    """Workspace ``path`` starts with mode 000; the agent must restore sensible modes."""
    return Fault(kind="permission", target=path, times=1, message=f"{path}: Permission denied")


def missing_tool(program: str) -> Fault:
    """``program`` is not on PATH; another way to do the job exists."""
    return Fault(kind="missing_tool", target=program, times=1,
                 message=f"{program}: command not found")


def retry(line: str, times: int = 1) -> str:
    """An oracle line that survives ``times`` transient failures: ``cmd || cmd ...``."""
    return " || ".join([f"( {line} )" if "&&" in line or "|" in line else line] * (times + 1))


# ---------------------------------------------------------------------------------------
# Cards.

Files = Mapping[str, "str | bytes | FileEntry"]


def to_tree(files: Files) -> dict[str, FileEntry]:
    """Wrap ``str``/``bytes`` values as regular files (0644); keep FileEntry values."""
    out: dict[str, FileEntry] = {}
    for path, v in files.items():
        if isinstance(v, FileEntry):
            out[path] = v
        else:
            out[path] = FileEntry(v.encode() if isinstance(v, str) else v)
    return out


def oracle_steps(solution: Sequence[str]) -> int:
    """The oracle's step count: its non-empty, non-comment lines plus the final submit."""
    return sum(1 for ln in solution if ln.strip() and not ln.lstrip().startswith("#")) + 1


def finish_card(template: type[Template], *, variant: str, instruction: str,
                workspace: Files, tests: TestModule | Iterable[TestModule],
                solution: Sequence[str], faults: Sequence[Fault] = (),
                infeasible_reason: str | None = None, protected: Sequence[str] = (),
                runner: str = "files", tags: Sequence[str] = (),
                command_timeout_s: float = 30.0, base_layers: Sequence[Files] = ()) -> TaskCard:
    """Assemble a generated card.

    The horizon comes from the oracle's step count (:func:`oracle_steps`; for an infeasible
    card, the count the feasible twin would need — pass its lines as ``solution``); the step
    budget is ``max(20, 3 × steps)`` so that an agent can explore and recover, and the
    per-command timeout (default 30 s) must cover the whole oracle, which the scripted
    oracle plan runs as a single ``run``. An infeasible
    card's ``solution`` becomes a comment naming the reason (its oracle gives up). ``make``
    fills in id, seed, split and ``feasible``.
    """
    steps = oracle_steps(solution)
    modules = [tests] if isinstance(tests, TestModule) else list(tests)
    ids = [i for m in modules for i in m.ids]
    if len(set(ids)) != len(ids) or not ids:
        raise ValueError("hidden tests must have at least one test and unique node ids")
    infeasible = variant == "infeasible"
    if infeasible and not infeasible_reason:
        raise ValueError("an infeasible card needs infeasible_reason")
    if variant == "fault" and not faults:
        raise ValueError("a fault card needs at least one fault")
    script = (f"# infeasible: the oracle gives up ({infeasible_reason})\n" if infeasible
              else "set -e\n" + "".join(ln + "\n" for ln in solution))
    # model_validate keeps the schema's defaults for every field not set here
    budget = Budget.model_validate({"max_steps": max(20, 3 * steps),
                                    "command_timeout_s": command_timeout_s,
                                    "episode_timeout_s": max(300.0, 20.0 * steps)})
    acceptance = Acceptance.model_validate({"tests": ids, "protected": list(protected),
                                            "runner": runner})
    card = TaskCard.model_validate({
        "id": template.template_id(), "type": template.family,
        "horizon": horizon_for_steps(steps), "instruction": instruction,
        "budget": budget, "acceptance": acceptance,
        "faults": list(faults) if variant == "fault" else [],
        "feasible": not infeasible,
        "infeasible_reason": infeasible_reason if infeasible else None,
        "tags": sorted({*template.tags, *tags}), "template": template.template_id(),
    })
    card.workspace = to_tree(workspace)
    card.tests = {m.filename: FileEntry.text(m.source) for m in modules}
    card.solution = script
    card.base_layers = [to_tree(b) for b in base_layers]
    return card


__all__ = [
    "EXTS_HELDOUT", "EXTS_TRAIN", "TEST_HEADER", "WORDS_HELDOUT", "WORDS_TRAIN", "TestModule",
    "ext_pool", "finish_card", "missing_tool", "oracle_steps", "permission", "pick", "retry",
    "shq", "text_block", "text_lines", "to_tree", "transient", "unique_names", "word_pool",
]
