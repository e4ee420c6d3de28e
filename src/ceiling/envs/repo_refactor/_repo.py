"""Rendering generated repositories and computing the answers their tests expect.

:func:`call_all` writes a file tree to a temp folder, imports the named modules and calls
the named functions: every expected value in a visible or hidden test comes from running
the generator's own correct code, never from a hand-written number. Imports are serialised
by a lock and the generated package is removed from ``sys.modules`` afterwards, so two
cards with the same package name never see each other's modules.

:data:`BEHAVIOUR` is the hidden test that replays those calls in the grader's subject
(``outcome(subject, "pkg.mod:fn", *args)``: plain data back) and compares with ``same``
(exact builtin types). :data:`SUBJECT_HELPERS` is trusted helper code the hidden tests
``subject.define`` next to the workspace's objects: it resolves dotted paths (class methods
included) and replays a call with a shared function replaced by a token-returning stand-in,
which shows whether the caller really goes through that function.
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

def test_behaviour(subject):
    """Every generated call returns exactly what the original (correct) code returned."""
    _require_done(subject)
    for mod, fn, args, want in CASES:
        got = outcome(subject, f"{mod}:{fn}", *args)
        assert same(got, want), f"{mod}.{fn}{args!r} returned {got!r}, expected {want!r}"
'''

# Kept for compatibility: the readers now live in ``_kit.TEST_PRELUDE`` (regular files only).
SOURCE_HELPERS = ""

SUBJECT_HELPERS = '''
import importlib


def _target(mod, path):
    obj = importlib.import_module(mod)
    parts = path.split(".")
    for i, part in enumerate(parts):
        obj = getattr(obj, part)
        if i < len(parts) - 1 and isinstance(obj, type):
            obj = obj()
    return obj


def call_path(mod, path, args, kwargs=None):
    """Call mod.path(*args, **kwargs); "Cls.meth" calls the method of a fresh Cls()."""
    return _target(mod, path)(*args, **(kwargs or {}))


def routed(mod, path, owner, name, token, args):
    """Call mod.path(*args) with owner.name -- and every global of `mod` bound to that very
    object -- replaced by a stand-in that returns `token`. A caller that really calls
    owner.name returns a value built from the token; a private copy does not."""
    module, home = importlib.import_module(mod), importlib.import_module(owner)
    real = getattr(home, name, None)
    if real is None:
        return None
    patched = []
    for space in (home, module):
        for key, value in list(vars(space).items()):
            if value is real:
                patched.append((space, key))
                setattr(space, key, lambda *a, **k: token)
    try:
        return call_path(mod, path, args)
    finally:
        for space, key in patched:
            setattr(space, key, real)


def module_of(mod, path):
    return getattr(_target(mod, path), "__module__", None)


def same_objects(pairs):
    """For each ((mod, name), (mod2, name2)): whether both names hold the same object."""
    return [getattr(importlib.import_module(a), x, None) is getattr(importlib.import_module(b), y, 0)
            for (a, x), (b, y) in pairs]
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
