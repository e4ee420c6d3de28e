"""Rendering generated repositories and computing the answers their tests expect.

:func:`call_all` writes a file tree to a temp folder, imports the named modules and calls
the named functions: every expected value in a visible or hidden test comes from running
the generator's own correct code, never from a hand-written number. Imports are serialised
by a lock and the generated package is removed from ``sys.modules`` afterwards, so two
cards with the same package name never see each other's modules.

:func:`behaviour_test` renders the hidden test that replays those calls against the final
workspace and compares with :func:`same` (exact builtin types).
"""

from __future__ import annotations

import copy
import importlib
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ...cards import FileEntry, write_tree

_LOCK = threading.Lock()

Call = tuple[str, str, tuple[Any, ...]]  # (dotted module, function, args)


def call_all(files: Mapping[str, str], calls: Sequence[Call]) -> list[Any]:
    """Results of ``calls`` against ``files`` (exceptions become ``'<ExcName>'``)."""
    roots = {c[0].split(".")[0] for c in calls}
    out: list[Any] = []
    with _LOCK, tempfile.TemporaryDirectory(prefix="ceiling-gen-") as tmp:
        write_tree({k: FileEntry.text(v) for k, v in files.items()}, tmp)
        sys.path.insert(0, tmp)
        saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in roots}
        for k in saved:
            del sys.modules[k]
        importlib.invalidate_caches()
        try:
            for mod, fn, args in calls:
                try:
                    out.append(getattr(importlib.import_module(mod), fn)(*copy.deepcopy(args)))
                except Exception as e:  # noqa: BLE001 (recorded as the expected result)
                    out.append(f"<{type(e).__name__}>")
        finally:
            sys.path.remove(tmp)
            for k in [k for k in sys.modules if k.split(".")[0] in roots]:
                del sys.modules[k]
            sys.modules.update(saved)
    return out


def module_text(doc: str, imports: Sequence[str], chunks: Sequence[str]) -> str:
    text = f'"""{doc}"""\n'
    if imports:
        text += "\n" + "\n".join(imports) + "\n"
    for c in chunks:
        text += "\n\n" + c.rstrip("\n") + "\n"
    return text


def cases_literal(calls: Sequence[Call], results: Sequence[Any]) -> str:
    rows = [f"    ({m!r}, {f!r}, {a!r}, {r!r})," for (m, f, a), r in zip(calls, results)]
    return "CASES = [\n" + "\n".join(rows) + "\n]\n"


BEHAVIOUR = '''

def test_behaviour():
    """Every generated call returns exactly what the original (correct) code returned."""
    _require_done()
    import copy
    import importlib
    for mod, fn, args, want in CASES:
        got = getattr(importlib.import_module(mod), fn)(*copy.deepcopy(args))
        assert same(got, want), f"{mod}.{fn}{args!r} returned {got!r}, expected {want!r}"
'''

SOURCE_HELPERS = '''

def source(rel):
    with open(os.path.join(WS, rel), encoding="utf-8") as fh:
        return fh.read()


def tree(rel):
    import ast
    return ast.parse(source(rel))


def py_files(pkg):
    out = []
    for root, _dirs, files in os.walk(os.path.join(WS, pkg)):
        for f in files:
            if f.endswith(".py"):
                out.append(os.path.relpath(os.path.join(root, f), WS))
    return sorted(out)
'''


def visible_test(pkg: str, calls: Sequence[Call], results: Sequence[Any], *,
                 label: str = "") -> str:
    """A visible pytest file (in the workspace) asserting ``calls`` give ``results``."""
    lines = [f'"""Tests for {pkg}{" (" + label + ")" if label else ""}. Run: python3 -m pytest -q tests"""',
             "import pathlib", "import sys", "",
             "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))", ""]
    mods = sorted({m for m, _, _ in calls})
    for m in mods:
        lines.append(f"import {m}  # noqa: E402")
    seen: dict[str, int] = {}
    for (m, f, a), r in zip(calls, results):
        seen[f] = seen.get(f, 0) + 1
        lines += ["", "", f"def test_{f}_{seen[f]}():",
                  f"    assert {m}.{f}(*{a!r}) == {r!r}"]
    return "\n".join(lines) + "\n"
