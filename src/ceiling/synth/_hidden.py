"""A project's own test files as a card's hidden tests (``runner: inprocess``).

The grader writes hidden tests flat under its own folder and runs pytest with
``--noconftest`` and its own ini (docs/verifier.md). So each test file is renamed to a
unique ``test_*.py`` basename (``toolz/tests/test_dicttoolz.py`` -> ``test_dicttoolz.py``;
clashes take their folder names as a prefix) and gets one line, after its docstring and
``from __future__`` imports, that puts the workspace (or its ``src/``) first on ``sys.path``,
so the tests import the agent's copy of the library.

**Helper modules** beside the tests (``tests/__init__.py`` holding a shared mixin,
``tests/helpers.py``...) travel with the hidden tests, flat, as ``_csynth_<dotted path>.py``
(a name no library or stdlib module has; pytest does not collect it), and every import that
reaches them — relative (``from . import Mixin``, ``from .helpers import x``) or absolute
through the tests' top package (``from tests.helpers import x``) — is rewritten to the flat
name. So the grader runs the project's own helpers, never the workspace's copy (which the
agent can edit). An import that cannot be rewritten (``import tests.helpers`` without
``as``, a relative import above the tests' top package, one sharing its line with other
statements) is left as it was: the test fails in the baseline and is never used, as are
tests that need a ``conftest.py`` fixture.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from ..cards import FileEntry, FileTree

HELPER_PREFIX = "_csynth_"


def header(import_root: str) -> str:
    """The workspace (or its ``src/``) first on ``sys.path``, then the hidden tests' own
    folder before it: the ``_csynth_*`` helpers resolve to the grader's copies, never to a
    same-named module the agent plants in the workspace."""
    sub = f', "{import_root}"' if import_root else ""
    return ("import os as _ceiling_os, sys as _ceiling_sys; _ceiling_sys.path.insert(0, "
            f"_ceiling_os.path.join(_ceiling_os.environ.get('WORKSPACE', '/workspace'){sub}))"
            "; _ceiling_sys.path.insert(0, _ceiling_os.path.dirname(_ceiling_os.path.abspath("
            "__file__)))  # added by ceiling synth\n")


def flat_names(paths: Iterable[str]) -> dict[str, str]:
    """Source path -> unique hidden file name (``test_*.py``)."""
    paths = sorted(paths)
    out: dict[str, str] = {}
    used: set[str] = set()
    base_count: dict[str, int] = {}
    for p in paths:
        base_count[p.rsplit("/", 1)[-1]] = base_count.get(p.rsplit("/", 1)[-1], 0) + 1
    for p in paths:
        parts = p.split("/")
        base = parts[-1]
        if not base.startswith("test_"):
            base = "test_" + base
        name = base
        if base_count[parts[-1]] > 1 or name in used:
            prefix = "_".join(x.replace("-", "_").replace(".", "_") for x in parts[:-1])
            name = f"test_{prefix}_{base[5:]}" if prefix else base
        i = 2
        while name in used:
            name = f"{name[:-3]}_{i}.py"
            i += 1
        used.add(name)
        out[p] = name
    return out


def with_header(source: str, import_root: str) -> str:
    """``source`` with the sys.path line inserted after its docstring and future imports.
    A file that does not parse is returned unchanged (it fails collection, so its tests
    never enter a card)."""
    try:
        mod = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    line = 0
    for i, node in enumerate(mod.body):
        value = node.value if isinstance(node, ast.Expr) else None
        is_doc = i == 0 and isinstance(value, ast.Constant) and isinstance(value.value, str)
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if is_doc or is_future:
            line = node.end_lineno or node.lineno
        else:
            break
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join(lines[:line]) + header(import_root) + "".join(lines[line:])


def strip_tests(source: str, names: set[str]) -> str | None:
    """``source`` without the test functions or methods named in ``names`` (``test_x`` or
    ``Cls::test_m``, parameters stripped); None when one cannot be removed cleanly."""
    if not names:
        return source
    try:
        mod = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.splitlines(keepends=True)
    cuts: list[tuple[int, int, str]] = []
    found: set[str] = set()

    def visit(body: list[ast.stmt], prefix: str, indent_of: ast.AST | None) -> None:
        defs = [s for s in body if not isinstance(s, ast.Expr)]
        for st in body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    prefix + st.name in names:
                first = min([st.lineno] + [d.lineno for d in st.decorator_list])
                filler = ""
                if indent_of is not None and len(defs) == 1:
                    filler = " " * st.col_offset + "pass\n"
                cuts.append((first, st.end_lineno or st.lineno, filler))
                found.add(prefix + st.name)
            elif isinstance(st, ast.ClassDef) and not prefix:
                visit(st.body, st.name + "::", st)

    visit(mod.body, "", None)
    if found != names:
        return None
    for first, last, filler in sorted(cuts, reverse=True):
        lines[first - 1:last] = [filler] if filler else []
    return "".join(lines)


def _module(path: str) -> str:
    """``tests/helpers.py`` -> ``tests.helpers``; ``tests/__init__.py`` -> ``tests``."""
    mod = path[:-3].replace("/", ".")
    return mod.removesuffix(".__init__")


def helper_files(tree: FileTree, test_files: Iterable[str]) -> dict[str, str]:
    """Dotted module -> source path of every non-test ``.py`` file in the folders that hold
    test files and in their package parents (``__init__.py`` chains), conftest excepted."""
    tests = set(test_files)
    dirs: set[str] = set()
    for f in tests:
        parts = f.split("/")[:-1]
        while parts:
            dirs.add("/".join(parts))
            if f"{'/'.join(parts)}/__init__.py" not in tree:
                break
            parts = parts[:-1]
    out: dict[str, str] = {}
    for p, e in tree.items():
        if e.kind != "file" or not p.endswith(".py") or p in tests:
            continue
        folder, _, base = p.rpartition("/")
        if folder in dirs and base != "conftest.py":
            out[_module(p)] = p
    return out


def _flat(mod: str) -> str:
    return HELPER_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", mod.replace(".", "__"))


def _rewrite_import(node: ast.stmt, package: str, helpers: dict[str, str]) -> str | None:
    """The replacement of an import statement that reaches a helper module, or None."""
    tops = {h.split(".")[0] for h in helpers}
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".") if package else []
            if node.level - 1 > len(base) or (node.level - 1 == len(base) and not node.module):
                return None
            base = base[: len(base) - (node.level - 1)]
            target = ".".join([*base, *([node.module] if node.module else [])])
        else:
            target = node.module or ""
        if not target or target.split(".")[0] not in tops:
            return None
        subs, names = [], []
        for a in node.names:
            if f"{target}.{a.name}" in helpers:
                subs.append(f"import {_flat(f'{target}.{a.name}')} as {a.asname or a.name}")
            elif target in helpers and a.name != "*":
                names.append(a.name if not a.asname else f"{a.name} as {a.asname}")
            elif target in helpers:
                names.append("*")
            else:
                return None
        if names:
            subs.insert(0, f"from {_flat(target)} import {', '.join(names)}")
        return "; ".join(subs)
    if isinstance(node, ast.Import):
        parts = []
        for a in node.names:
            if a.name in helpers and a.asname:
                parts.append(f"import {_flat(a.name)} as {a.asname}")
            elif a.name.split(".")[0] in tops:
                return None  # `import tests.helpers` binds `tests`: not rewritten
            else:
                parts.append(f"import {a.name}" + (f" as {a.asname}" if a.asname else ""))
        return "; ".join(parts) if any(p.startswith(f"import {HELPER_PREFIX}")
                                       for p in parts) else None
    return None


def rewrite_helper_imports(source: str, path: str, helpers: dict[str, str]) -> str:
    """``source`` (the file at ``path``) with its imports of helper modules pointing at
    their flat hidden names; unchanged where it does not parse or has none."""
    if not helpers:
        return source
    try:
        mod = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    module = _module(path)
    package = module if path.endswith("/__init__.py") else module.rpartition(".")[0]
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(mod):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        new = _rewrite_import(node, package, helpers)
        end = node.end_lineno or node.lineno
        if new is None or node.end_col_offset is None:
            continue
        head = lines[node.lineno - 1][: node.col_offset]
        tail = lines[end - 1][node.end_col_offset:]
        if head.strip() or tail.strip().lstrip(";").strip().split("#")[0].strip():
            continue  # shares its line with other code: left as it was
        edits.append((node.lineno, end, head + new + "\n"))
    for first, last, text in sorted(edits, reverse=True):
        lines[first - 1:last] = [text]
    return "".join(lines)


def hidden_tests(tree: FileTree, files: Iterable[str], import_root: str,
                 drop: Iterable[str] = ()) -> FileTree:
    """The hidden test tree for ``files`` (paths in ``tree``), without the tests in
    ``drop`` (hidden node ids: tests the hardened grader flags); a file whose dropped
    tests cannot be cut out is left out."""
    files = list(files)
    names = flat_names(files)
    chosen = set(files)
    helpers = helper_files(tree, [p for p in tree if p in chosen or is_test_file(p)])
    by_file: dict[str, set[str]] = {}
    for nid in drop:
        f, _, rest = nid.partition("::")
        by_file.setdefault(f, set()).add(rest.split("[", 1)[0])
    out: FileTree = {}
    for src, name in names.items():
        text: str | None = tree[src].data.decode("utf-8", errors="replace")
        text = strip_tests(text or "", by_file.get(name, set()))
        if text is None:
            continue
        text = rewrite_helper_imports(text, src, helpers)
        out[name] = FileEntry(with_header(text, import_root).encode())
    used = "".join(e.data.decode("utf-8", "replace") for e in out.values())
    if HELPER_PREFIX in used:  # helpers travel only with tests that import them (and theirs)
        for mod, src in sorted(helpers.items()):
            text = rewrite_helper_imports(tree[src].data.decode("utf-8", "replace"), src,
                                          helpers)
            out[_flat(mod) + ".py"] = FileEntry(with_header(text, import_root).encode())
    return out


def is_test_file(path: str) -> bool:
    """``test_*.py`` or ``*_test.py``: what pytest collects by default."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def source_of(nodeid: str, names: dict[str, str]) -> str | None:
    """The source test file of a hidden node id (``test_x.py::...``)."""
    f = nodeid.split("::", 1)[0]
    for src, name in names.items():
        if name == f:
            return src
    return None
