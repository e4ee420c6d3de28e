"""Rollout fixtures: small real cards, the best sandbox backend here, a tiny random model."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from ceiling.cards import TaskCard


def _namespace_works() -> bool:
    from ceiling._errors import SandboxError
    from ceiling.sandbox import open_sandbox

    try:
        with open_sandbox([{}], backend="namespace") as sb:
            return sb.exec("true").exit_code == 0
    except (SandboxError, OSError):
        return False


@pytest.fixture(scope="session")
def backend() -> str:
    """``namespace`` where it works, else ``local`` (its warning silenced for these tests)."""
    if _namespace_works():
        return "namespace"
    warnings.filterwarnings("ignore", category=UserWarning, message=".*local.*")
    return "local"


@pytest.fixture(autouse=True)
def _quiet_local(backend: str) -> None:
    if backend == "local":
        from ceiling.sandbox import LocalSandboxWarning

        warnings.simplefilter("ignore", LocalSandboxWarning)


@pytest.fixture(scope="session")
def demo_cards() -> list[TaskCard]:
    from ceiling.envs import make

    return [make("terminal_ops/demo-create-v1", seed=1),
            make("terminal_ops/demo-copy-v1", seed=2),
            make("terminal_ops/demo-count-v1", seed=3),
            make("terminal_ops/demo-delete-v1", seed=4, variant="infeasible")]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ceiling.policies._tiny import build_random_chat_model

    return build_random_chat_model(tmp_path_factory.mktemp("tiny") / "model")
