"""Fixtures for verifier tests: small hand-made cards and the sandbox backend to use.

The backend is ``namespace`` where it runs (root with namespaces), else ``local`` (its
no-isolation warning is filtered for these tests only)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest

from ceiling.cards import Acceptance, Milestone, TaskCard

TESTS = '''import os
import pathlib

W = pathlib.Path(os.environ["WORKSPACE"])


def test_hello():
    assert (W / "out.txt").read_text() == "hello\\n"


def test_input_kept():
    assert (W / "in.txt").read_text() == "x\\n"
    assert (W / "out.txt").read_text().strip() == "hello"
'''

SANDBOX_TESTS = '''import os
import sys

sys.path.insert(0, os.environ["WORKSPACE"])
import app  # noqa: E402


def test_add():
    assert app.add(2, 3) == 5


def test_add_neg():
    assert app.add(-2, -3) == -5
'''


def _backend() -> str:
    from ceiling.sandbox import namespaces_available

    return "namespace" if namespaces_available() is None else "local"


BACKEND = _backend()


@pytest.fixture(autouse=True)
def _quiet_local() -> None:
    warnings.filterwarnings("ignore", message=".*backend 'local' has NO isolation.*")


@pytest.fixture
def backend() -> str:
    return BACKEND


def files_card(**kw: object) -> TaskCard:
    """Write hello to out.txt; in.txt is protected; graded from files."""
    acc = Acceptance(tests=["test_task.py::test_hello", "test_task.py::test_input_kept"],
                     protected=["in.txt"], runner="files")
    card = TaskCard(id="demo/hello-v1", type="terminal_ops", horizon="short",
                    instruction="Write hello to out.txt.", acceptance=acc,
                    **kw).with_files(workspace={"in.txt": "x\n"}, tests={"test_task.py": TESTS})
    card.solution = "echo hello > out.txt\n"
    return card


def sandbox_card(**kw: object) -> TaskCard:
    """Fix app.add; tests import workspace code, so they run inside a sandbox."""
    acc = Acceptance(tests=["test_app.py::test_add", "test_app.py::test_add_neg"],
                     runner="sandbox", test_timeout_s=30)
    card = TaskCard(id="demo/fix-add-v1", type="repo_refactor", horizon="short",
                    instruction="Fix add() in app.py so it returns the sum.", acceptance=acc,
                    **kw).with_files(workspace={"app.py": "def add(a, b):\n    return a - b\n"},
                                     tests={"test_app.py": SANDBOX_TESTS})
    card.solution = "sed -i 's/a - b/a + b/' app.py\n"
    return card


@pytest.fixture
def make_files_card() -> Callable[..., TaskCard]:
    return files_card


@pytest.fixture
def make_sandbox_card() -> Callable[..., TaskCard]:
    return sandbox_card


__all__ = ["BACKEND", "Milestone", "files_card", "sandbox_card"]
