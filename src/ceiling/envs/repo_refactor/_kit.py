"""Card-building helpers shared by the ``repo_refactor`` and ``security_audit`` families.

- :func:`oracle_script` turns "these files end with this content" into the oracle's ``sh``
  script: one ``python3`` heredoc that rewrites the files, wrapped so that a transient
  failure of ``python3`` (a fault variant) is retried once, preceded by a ``chmod`` when a
  permission fault removed access to a file the oracle edits. The script uses only ``sh``
  built-ins, ``chmod`` and ``python3``, so a ``missing_tool`` fault on ``sed``/``grep``/
  ``awk``/``curl`` never stops it.
- :func:`pick_fault` chooses the fault of a ``fault`` variant.
- :func:`assemble` builds the :class:`TaskCard` with the fields every generated card shares.
- Name pools (:func:`ident`, :func:`package_name`) give rng-chosen identifiers that never
  shadow a standard-library module (the verifier flags shadowing modules as planted files).

Hidden tests (``runner: subject``) never import or execute workspace code in the test
process: they call it through the grader's ``subject`` fixture (``subject.call("pkg.mod:fn",
*args)`` returns plain data; ``subject.define(src)`` runs trusted helper code next to the
workspace's objects) and read source files as data under ``$WORKSPACE`` (AST checks run in
the test process, on text). :data:`TEST_PRELUDE` is the head of every such file: ``WS`` (the
workspace path), ``same(a, b)`` (strict equality: exact builtin types, floats within 1e-9),
``outcome(subject, target, *args)`` (the value, or ``"<ExcName>"`` when the call raised,
the convention the generators record expected results in) and the source readers
``source``/``tree``/``py_files`` (regular files only, never through a symlink).
:data:`INPROCESS_PRELUDE` is the former head, for ``runner: inprocess`` cards only: it puts
``$WORKSPACE`` first on ``sys.path`` of the test process.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ...cards import Acceptance, Budget, Fault, TaskCard

VERBS = ("compute", "tally", "score", "merge", "rank", "scale", "adjust", "collect", "measure",
         "estimate", "summarize", "resolve", "balance", "project", "assess", "settle", "route",
         "weigh", "price", "audit", "plan", "forecast", "track", "sample")
NOUNS = ("orders", "parcels", "tickets", "invoices", "shipments", "readings", "ledgers",
         "accounts", "batches", "routes", "quotas", "bookings", "refunds", "credits", "claims",
         "rentals", "pallets", "meters", "grades", "tariffs", "wages", "crates", "votes", "trips",
         "doses", "loans", "bids", "fares", "yields", "stocks")
PKG_WORDS = ("harbor", "atlas", "cobalt", "juniper", "meadow", "quarry", "saffron", "tundra",
             "willow", "ember", "falcon", "granite", "lumen", "orchid", "pylon", "ripple",
             "summit", "thistle", "vector", "zephyr", "beacon", "cinder", "delta", "fjord")
PKG_SUFFIX = ("kit", "core", "works", "lab", "hub", "ops", "desk", "base")
MODULE_WORDS = ("billing", "stock", "pricing", "reports", "payroll", "shipping", "metrics",
                "orders", "accounts", "claims", "forecast", "routing", "budget", "audit",
                "tariffs", "grading", "rentals", "voting", "loans", "fleet", "weather",
                "energy", "clinic", "library", "transit", "harvest", "rebates", "ratings")
STDLIB = frozenset(sys.stdlib_module_names) | {"test", "tests", "conftest", "pytest", "yaml"}

TEST_PRELUDE = '''"""Hidden tests (generated). They run in the grader, never next to workspace code: the
workspace is reached through the `subject` fixture and read as data under WORKSPACE."""
import ast
import math
import os
import stat

WS = os.environ["WORKSPACE"]


def same(a, b):
    """Strict equality: exact builtin types, floats within 1e-9 relative."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return sorted(a) == sorted(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (int, str, bool, type(None), bytes)):
        return a == b
    return False


def outcome(subject, target, *args, **kwargs):
    """What calling `target` ("pkg.mod:fn") in the subject gives: its value, or
    "<ExcName>" when it raised (a timeout or a crashed subject fails the test)."""
    try:
        return subject.call(target, *args, **kwargs)
    except subject.Error as exc:
        return f"<{exc.type}>"


def source(rel):
    """The text of a workspace file: a regular file, never read through a symlink."""
    path = os.path.join(WS, rel)
    for parent in [rel.split("/")[:i] for i in range(1, rel.count("/") + 1)]:
        assert not os.path.islink(os.path.join(WS, *parent)), f"{'/'.join(parent)} is a symlink"
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode), f"{rel} is not a regular file"
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def tree(rel):
    return ast.parse(source(rel))


def py_files(pkg):
    """The .py files under a package folder (relative paths, symlinks included, so that
    `source` rejects a linked file instead of the walk skipping it)."""
    out = []
    for root, _dirs, files in os.walk(os.path.join(WS, pkg)):
        for f in files:
            if f.endswith(".py"):
                out.append(os.path.relpath(os.path.join(root, f), WS))
    return sorted(out)
'''

INPROCESS_PRELUDE = '''"""Hidden tests (generated). The grader sets WORKSPACE to the agent's final workspace."""
import math
import os
import sys

WS = os.environ["WORKSPACE"]
sys.path.insert(0, WS)


def same(a, b):
    """Strict equality: exact builtin types, floats within 1e-9 relative."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return sorted(a) == sorted(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (int, str, bool, type(None), bytes)):
        return a == b
    return False
'''


def ident(rng: random.Random, taken: set[str], words: Sequence[str] = VERBS,
          nouns: Sequence[str] = NOUNS) -> str:
    """A fresh ``verb_noun`` identifier not in ``taken`` (added to it)."""
    for _ in range(1000):
        name = f"{rng.choice(words)}_{rng.choice(nouns)}"
        if name not in taken and name not in STDLIB:
            taken.add(name)
            return name
    n = len(taken)
    name = f"{rng.choice(words)}_{rng.choice(nouns)}_{n}"
    taken.add(name)
    return name


def module_names(rng: random.Random, n: int, taken: set[str]) -> list[str]:
    """``n`` distinct module names (words, then ``word_N``), never a stdlib name."""
    out: list[str] = []
    pool = list(MODULE_WORDS)
    rng.shuffle(pool)
    i = 0
    while len(out) < n:
        base = pool[i % len(pool)]
        name = base if i < len(pool) else f"{base}_{i // len(pool) + 1}"
        i += 1
        if name in taken or name in STDLIB:
            continue
        taken.add(name)
        out.append(name)
    return out


def package_name(rng: random.Random) -> str:
    """A package name like ``cobalt_works`` (compound, so it never shadows an installed one)."""
    return f"{rng.choice(PKG_WORDS)}_{rng.choice(PKG_SUFFIX)}"


def oracle_script(files: Mapping[str, str], *, delete: Sequence[str] = (),
                  chmod: Sequence[str] = (), note: str = "") -> str:
    """The oracle: write ``files`` (path -> final text) and delete ``delete``, via python3.

    Retries the python3 step once (transient faults); ``chmod`` paths get ``u+rw`` first
    (permission faults). Idempotent, so the retry is safe."""
    lines = ["#!/bin/sh", f"# oracle{': ' + note if note else ''}", "set -e"]
    for p in chmod:
        lines.append(f"chmod u+rw '{p}' 2>/dev/null || true")
    body = [
        "import pathlib",
        f"FILES = {dict(files)!r}",
        f"DELETE = {list(delete)!r}",
        "for rel, text in FILES.items():",
        "    p = pathlib.Path(rel)",
        "    p.parent.mkdir(parents=True, exist_ok=True)",
        "    if p.exists():",
        "        p.chmod(0o644)",
        "    p.write_text(text)",
        "for rel in DELETE:",
        "    pathlib.Path(rel).unlink(missing_ok=True)",
    ]
    lines += ["apply() {", "python3 - <<'CEILING_EOF'", *body, "CEILING_EOF", "}",
              "apply || apply", ""]
    return "\n".join(lines)


GIVE_UP = "#!/bin/sh\n# oracle: this card is infeasible; the right move is give_up\nexit 0\n"

MISSING_TOOLS = ("sed", "grep", "awk", "perl")


def pick_fault(rng: random.Random, edit_path: str) -> tuple[Fault, list[str]]:
    """A fault for a ``fault`` variant, and the paths the oracle must ``chmod`` first."""
    kind = rng.choice(("transient", "permission", "missing_tool"))
    if kind == "transient":
        return Fault(kind="transient", target="python3", times=1,
                     message="python3: temporary failure (resource busy), try again"), []
    if kind == "permission":
        return Fault(kind="permission", target=edit_path, times=1), [edit_path]
    return Fault(kind="missing_tool", target=rng.choice(MISSING_TOOLS), times=1), []


def fault_for(rng: random.Random, variant: str, edit_path: str) -> tuple[Fault | None, list[str]]:
    """``pick_fault`` on a ``fault`` variant; no fault (and nothing to chmod) otherwise."""
    if variant != "fault":
        return None, []
    return pick_fault(rng, edit_path)


def budget_for(horizon: str) -> Budget:
    steps = {"short": 25, "medium": 60, "long": 150}[horizon]
    return Budget(max_steps=steps, command_timeout_s=30.0, episode_timeout_s=steps * 20.0,
                  max_output_bytes=16_384)


def assemble(template: Any, *, difficulty: int, variant: str, instruction: str,
             workspace: Mapping[str, str], tests: Mapping[str, str], test_ids: Sequence[str],
             solution: str, protected: Sequence[str] = (), faults: Sequence[Fault] = (),
             infeasible_reason: str | None = None, tags: Sequence[str] = (),
             runner: str = "subject", test_timeout_s: float = 120.0) -> TaskCard:
    """Build the card; ``template`` is the Template instance (for family, id and horizon).
    ``runner`` defaults to ``subject`` (host grader; tests reach workspace code only through
    the ``subject`` fixture)."""
    horizon = template.horizons[difficulty]
    card = TaskCard(
        id=template.template_id(),
        type=template.family,
        horizon=horizon,
        instruction=instruction,
        budget=budget_for(horizon),
        acceptance=Acceptance(tests=list(test_ids), protected=list(protected),
                              runner=runner, test_timeout_s=test_timeout_s),  # type: ignore[arg-type]
        faults=list(faults),
        feasible=infeasible_reason is None,
        infeasible_reason=infeasible_reason,
        difficulty=difficulty,
        tags=[*template.tags, f"variant:{variant}", *tags],
        split="heldout" if variant == "heldout" else "train",
        solution=solution,
    )
    card.with_files(workspace=dict(workspace), tests=dict(tests))
    return card


def test_ids(filename: str, source: str) -> list[str]:
    """The pytest node ids of the top-level ``test_*`` functions in ``source``."""
    import ast

    tree = ast.parse(source)
    return [f"{filename}::{n.name}" for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
