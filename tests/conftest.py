"""Shared test set-up: every test gets its own CEILING_HOME, and nothing touches a hub."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# generated cards derive from an installation secret (ceiling.envs._secret): pin one so the
# suite is reproducible and does not depend on (or create) a secret under CEILING_HOME
os.environ["CEILING_SECRET"] = "c0ffee" * 10 + "5eed"
# one sandbox runtime (python + pytest, ceiling.sandbox._runtime) for the whole session
# rather than a build (~0.3 s) in every test's CEILING_HOME
_RUNTIME = tempfile.mkdtemp(prefix="ceiling-test-runtime-")
os.environ.setdefault("CEILING_RUNTIME_DIR", _RUNTIME)
atexit.register(shutil.rmtree, _RUNTIME, True)


@pytest.fixture(autouse=True)
def _ceiling_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CEILING_HOME", str(tmp_path_factory.mktemp("ceiling_home")))
