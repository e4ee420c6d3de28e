"""A project's own test files as a card's hidden tests (``runner: inprocess``).

The grader writes hidden tests flat under its own folder and runs pytest with
``--noconftest`` and its own ini (docs/verifier.md). So each test file is renamed to a
unique ``test_*.py`` basename (``toolz/tests/test_dicttoolz.py`` -> ``test_dicttoolz.py``;
clashes take their folder names as a prefix) and gets one line, after its docstring and
``from __future__`` imports, that puts the workspace (or its ``src/``) first on ``sys.path``,
so the tests import the agent's copy of the library. Tests that need a ``conftest.py``
fixture, a relative import or a helper module beside them fail in the baseline and are
never used.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from ..cards import FileEntry, FileTree


def header(import_root: str) -> str:
    sub = f', "{import_root}"' if import_root else ""
    return ("import os as _ceiling_os, sys as _ceiling_sys; _ceiling_sys.path.insert(0, "
            f"_ceiling_os.path.join(_ceiling_os.environ.get('WORKSPACE', '/workspace'){sub}))"
            "  # added by ceiling synth\n")


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


def hidden_tests(tree: FileTree, files: Iterable[str], import_root: str,
                 drop: Iterable[str] = ()) -> FileTree:
    """The hidden test tree for ``files`` (paths in ``tree``), without the tests in
    ``drop`` (hidden node ids: tests the hardened grader flags); a file whose dropped
    tests cannot be cut out is left out."""
    names = flat_names(files)
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
        out[name] = FileEntry(with_header(text, import_root).encode())
    return out


def source_of(nodeid: str, names: dict[str, str]) -> str | None:
    """The source test file of a hidden node id (``test_x.py::...``)."""
    f = nodeid.split("::", 1)[0]
    for src, name in names.items():
        if name == f:
            return src
    return None
