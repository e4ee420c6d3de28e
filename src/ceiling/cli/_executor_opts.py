"""The ``--executor`` and ``--ray-address`` options every command that runs episodes takes.

``--executor local`` (default) runs environment steps in threads here; ``--executor ray``
runs them on Ray worker actors (docs/scale-out.md). ``--ray-address`` is ``auto`` (the
cluster ``ray start`` left on this node) or ``HOST:PORT``; ``CEILING_RAY_ADDRESS`` sets it
too; without either, ``ray`` starts a one-node Ray instance on this machine.
"""

from __future__ import annotations

from typing import Annotated

import typer

ExecutorOpt = Annotated[str, typer.Option(
    "--executor", help="where environment steps run: local (threads here) | ray (worker "
                       "actors on a Ray cluster, see docs/scale-out.md)")]
RayAddressOpt = Annotated[str | None, typer.Option(
    "--ray-address", envvar="CEILING_RAY_ADDRESS",
    help="Ray cluster for --executor ray: auto | HOST:PORT (default: a one-node Ray here)")]


def check_executor(executor: str, ray_address: str | None) -> None:
    """A clear error for an unknown executor or a malformed address (before any work)."""
    from .._errors import ConfigError
    from ..rollout import EXECUTORS, resolve_ray_address

    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}", where="--executor",
                          fix=f"use one of {list(EXECUTORS)}")
    if executor == "ray":  # with local, a set CEILING_RAY_ADDRESS is simply unused
        resolve_ray_address(ray_address)
