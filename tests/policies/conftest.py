"""Fixtures: a tiny random chat model built from a config, and a live `ceiling serve`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ceiling.policies._serve import ServerThread


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ceiling.policies._tiny import build_random_chat_model

    return build_random_chat_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def served_tiny(tiny_model: Path) -> Iterator[ServerThread]:
    from ceiling.policies._hf import HFPolicy
    from ceiling.policies._serve import create_app

    app = create_app(HFPolicy(tiny_model), model_name="tiny")
    with ServerThread(app) as srv:
        yield srv
    app.state.batcher.close()
