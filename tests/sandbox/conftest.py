"""Sandbox fixtures: a namespace sandbox over a small workspace (skipped without root)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ceiling.cards import FileEntry
from ceiling.sandbox import Sandbox, namespaces_available, open_sandbox

needs_ns = pytest.mark.skipif(namespaces_available() is not None,
                              reason=f"namespace backend unavailable: {namespaces_available()}")

TREE = {"a.txt": FileEntry.text("hello\n"), "src/app.py": FileEntry.text("print('app')\n"),
        "run.sh": FileEntry.text("#!/bin/sh\necho run\n", 0o755)}


@pytest.fixture
def tree() -> dict[str, FileEntry]:
    return dict(TREE)


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    if namespaces_available() is not None:
        pytest.skip(f"namespace backend unavailable: {namespaces_available()}")
    with open_sandbox([TREE]) as s:
        yield s
