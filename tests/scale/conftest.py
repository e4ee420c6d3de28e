"""A real multi-node Ray cluster on this machine, shared by the tests of this folder.

``ray.cluster_utils.Cluster``: a head node that offers no environment slots (the driver
lives there) and two worker nodes, each its own raylet with 1 CPU and 2 ``ceiling_env``
slots. Tests that kill a node add their own node first. Skipped (with the reason) only
when ray is not importable; CI installs it (pinned in pyproject.toml).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from ceiling.cards import TaskCard

NODE = {"num_cpus": 1, "resources": {"ceiling_env": 2}}


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
    return "namespace" if _namespace_works() else "local"


@pytest.fixture(autouse=True)
def _quiet_local(backend: str) -> None:
    if backend == "local":
        from ceiling.sandbox import LocalSandboxWarning

        warnings.simplefilter("ignore", LocalSandboxWarning)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Any]:
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError as e:  # pragma: no cover - CI installs ray
        pytest.skip(f"ray is not importable ({e}); install the project (scripts/setup.sh)")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    c = Cluster(initialize_head=True, connect=False,
                head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(2):
        c.add_node(**NODE)
    c.wait_for_nodes()
    # as `ceiling` connects: no worker logs copied to this process's stdout
    ray.init(address=c.address, log_to_driver=False, logging_level="warning",
             configure_logging=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="session")
def suite() -> list[TaskCard]:
    """Six small cards (one infeasible) over four templates."""
    from ceiling.envs import make

    names = ["create", "copy", "count", "append", "create", "delete"]
    cards = [make(f"terminal_ops/demo-{n}-v1", seed=10 + i) for i, n in enumerate(names[:5])]
    return [*cards, make("terminal_ops/demo-delete-v1", seed=20, variant="infeasible")]
