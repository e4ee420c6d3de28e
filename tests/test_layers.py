"""The layer order of ``src/ceiling`` (docs/architecture.md), pinned.

Every ``import`` and ``from ... import`` in ``src/`` is parsed, including those inside
functions and under ``if TYPE_CHECKING:`` (a lazy import is still an edge of the graph).
Each module belongs to a *unit*: a sub-package (``ceiling.verify``) or a top-level module
(``ceiling.env``, ``ceiling._errors``). Two rules:

1. **Layers**: a unit imports only units on a lower floor of :data:`FLOORS` (or itself).
   :data:`ALLOWED_UP` lists the exceptions, each with its reason.
2. **Public names**: across units, import a package's door (``ceiling.verify``, or a public
   sub-module such as ``ceiling.verify.exploits``), never an underscore module or name of
   another package. The top-level floor modules (``ceiling._errors``...) are ceiling-wide
   internals and importable by every unit. :data:`KNOWN_PRIVATE` lists the imports not yet
   moved to a door; it may only shrink.

A new package must be placed in :data:`FLOORS` (and in docs/architecture.md) before its
imports pass. The checker runs on synthetic sources too: the last tests show it red.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: Lowest floor first. A unit may import units on strictly lower floors only.
FLOORS: list[tuple[str, ...]] = [
    ("ceiling", "_errors"),  # the door (only __version__ is imported from it) and errors
    ("_tree", "_yaml", "_home"),  # ceiling-wide helpers: file trees, YAML, CEILING_HOME
    ("sandbox",),  # knows nothing of cards: it takes file trees (ceiling._tree)
    ("cards",),  # a card may name a sandbox image to build
    ("tools", "_faults", "envs"),
    ("verify",),
    ("env",),
    ("policies",),
    ("harness",),
    ("basemodel",),
    ("rollout",),
    ("check", "evaluate"),
    ("train",),
    ("synth", "study", "importers"),
    ("cli",),
]

#: (importer, imported) unit pairs allowed against the order, with the reason.
ALLOWED_UP: dict[tuple[str, str], str] = {
    ("policies", "basemodel"): "builtin:NAME resolves a base folder with basemodel.resolve "
                               "(the package door; it imports nothing above _errors)",
}

#: Debts: imports that break a rule and are not fixed yet, keyed by (importing module,
#: imported module or module.name). The list may only shrink: an entry that no longer
#: breaks a rule fails :func:`test_known_debts_still_exist` until it is deleted.
KNOWN: dict[tuple[str, str], str] = {}

FLOOR_OF = {unit: i for i, units in enumerate(FLOORS) for unit in units}


@dataclass(frozen=True)
class Edge:
    importer: str  # dotted module name
    target: str  # dotted module the import resolves to
    name: str | None  # the imported name when it is not itself a module
    line: int


def unit(module: str) -> str:
    """``ceiling.verify._x`` -> ``verify``; ``ceiling.env`` -> ``env``; ``ceiling`` ->
    ``ceiling``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def source_modules(root: Path = SRC) -> dict[str, tuple[str, bool]]:
    """Every module under ``root/ceiling``: dotted name -> (source, is a package)."""
    out = {}
    for f in sorted((root / "ceiling").rglob("*.py")):
        parts = list(f.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (f.read_text(encoding="utf-8"), is_pkg)
    return out


def edges(module: str, source: str, is_pkg: bool, known: Mapping[str, object]) -> Iterator[Edge]:
    """The ceiling imports of one module (every ``import`` node, at any depth)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "ceiling":
                    yield Edge(module, a.name, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "ceiling":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in known:
                    yield Edge(module, sub, None, node.lineno)
                else:
                    yield Edge(module, target, a.name, node.lineno)


def _private(e: Edge) -> bool:
    names = e.target.split(".")[2:] + ([e.name] if e.name else [])  # after ceiling.<unit>
    return any(p.startswith("_") and not (p.startswith("__") and p.endswith("__"))
               for p in names)


def broken(modules: Mapping[str, tuple[str, bool]]) -> dict[tuple[str, str], str]:
    """Every import that breaks a rule: (importer, target) -> one line saying what and how
    to fix it; debts (:data:`KNOWN`) included."""
    out: dict[tuple[str, str], str] = {}
    for mod, (src, is_pkg) in modules.items():
        for e in edges(mod, src, is_pkg, modules):
            a, b = unit(e.importer), unit(e.target)
            if a == b:
                continue
            where = f"{e.importer}:{e.line}"
            key = (e.importer, e.target + (f".{e.name}" if e.name else ""))
            lines = [f"{where}: unit {u!r} has no floor: place it in FLOORS "
                     "(tests/test_layers.py) and docs/architecture.md"
                     for u in (a, b) if u not in FLOOR_OF]
            if a in FLOOR_OF and b in FLOOR_OF and FLOOR_OF[b] >= FLOOR_OF[a] \
                    and (a, b) not in ALLOWED_UP:
                lines.append(f"{where}: layer: {a} (floor {FLOOR_OF[a]}) imports {e.target} "
                             f"({b}, floor {FLOOR_OF[b]}); only lower floors are allowed")
            if _private(e):
                lines.append(f"{where}: private: {key[1]} is not public in ceiling.{b}; "
                             f"export it from the door of ceiling.{b} and import it there")
            if lines:
                out[key] = "; ".join(lines)
    return out


def violations(modules: Mapping[str, tuple[str, bool]]) -> list[str]:
    """One line per broken rule that is not a known debt (empty: the tree keeps the order)."""
    return sorted(v for k, v in broken(modules).items() if k not in KNOWN)


@pytest.fixture(scope="module")
def tree() -> dict[str, tuple[str, bool]]:
    return source_modules()


def test_src_keeps_the_layer_order_and_public_names(tree: dict[str, tuple[str, bool]]) -> None:
    found = violations(tree)
    assert not found, "\n".join(found)


def test_known_debts_still_exist(tree: dict[str, tuple[str, bool]]) -> None:
    stale = sorted(k for k in set(KNOWN) - set(broken(tree)) if k[0] in tree)
    assert not stale, f"fixed: delete these from KNOWN in tests/test_layers.py: {stale}"


def test_every_unit_of_src_has_a_floor(tree: dict[str, tuple[str, bool]]) -> None:
    missing = sorted({unit(m) for m in tree} - set(FLOOR_OF))
    assert not missing, f"place these in FLOORS and docs/architecture.md: {missing}"


def test_the_door_maps_only_public_modules() -> None:
    """``ceiling.__getattr__`` imports lazily from the modules named in ``_EXPORTS``."""
    import ceiling

    private = {name: mod for name, mod in ceiling._EXPORTS.items()
               if any(p.startswith("_") for p in mod.split(".")[2:])}
    assert not private, f"export these from their package's door: {private}"


# The checker itself, on synthetic modules: it must go red on a wrong import.

_GOOD = {
    "ceiling": ("", True),
    "ceiling.verify": ("from ._v import Verdict\n", True),
    "ceiling.verify._v": ("from ..sandbox import Sandbox\nfrom .._errors import CeilingError\n",
                          False),
    "ceiling.sandbox": ("class Sandbox: ...\n", True),
    "ceiling._errors": ("class CeilingError(Exception): ...\n", False),
    "ceiling.policies": ("", True),
    "ceiling.policies._hf": ("class HFPolicy: ...\n", False),
}


def test_checker_passes_a_well_layered_tree() -> None:
    assert violations(_GOOD) == []


def test_checker_is_red_on_an_upward_import_inside_a_function() -> None:
    bad = dict(_GOOD)
    bad["ceiling.sandbox._x"] = ("def f():\n    from ..verify import Verdict\n    return Verdict\n",
                                 False)
    found = violations(bad)
    assert len(found) == 1
    assert found[0].startswith(f"ceiling.sandbox._x:2: layer: sandbox (floor {FLOOR_OF['sandbox']})"
                               f" imports ceiling.verify (verify, floor {FLOOR_OF['verify']})")


def test_checker_is_red_on_a_private_name_of_another_package() -> None:
    bad = dict(_GOOD)
    bad["ceiling.train"] = ("", True)
    bad["ceiling.train._t"] = ("from ..policies._hf import HFPolicy\n", False)
    bad["ceiling.rollout._r"] = ("from ceiling.verify import _v\n", False)
    found = violations(bad)
    assert [f.split(": private: ")[1].split(" ")[0] for f in found] == [
        "ceiling.verify._v", "ceiling.policies._hf.HFPolicy"]


def test_checker_is_red_on_a_package_without_a_floor() -> None:
    bad = dict(_GOOD)
    bad["ceiling.newpkg"] = ("from ..verify import Verdict\n", True)
    found = violations(bad)
    assert found and "unit 'newpkg' has no floor" in found[0]


def test_docs_architecture_lists_the_same_floors() -> None:
    doc = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].isdigit():
            rows[int(cells[1])] = tuple(u.split(" ")[0].strip("`") for u in cells[2].split(", "))
    assert rows == dict(enumerate(FLOORS)), "docs/architecture.md's floor table != FLOORS"
