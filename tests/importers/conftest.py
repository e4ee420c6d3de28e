"""Importer tests: one image store for the session (layers are shared by content id, as on a
real machine), the namespace backend required for anything that builds or runs."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

collect_ignore_glob = ["tasks/*"]  # the task folders' own tests run only inside their cards


@pytest.fixture(scope="session")
def image_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="ceiling-test-images-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def _images(image_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CEILING_IMAGE_DIR", str(image_dir))
