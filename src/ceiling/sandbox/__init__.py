"""Sandboxes: isolated, layered workspaces that reset in milliseconds.

``open_sandbox(layers, backend=...)`` is the one door. ``layers`` are file trees or layer
ids, lowest first. Backends: ``namespace`` (Linux namespaces + overlayfs; the default) and
``local`` (a temp-dir copy with no isolation; must be asked for by name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._errors import ConfigError
from ..cards import FileEntry
from ._layers import LayerStore, ceiling_home
from ._local import LocalSandbox, LocalSandboxWarning
from ._types import WORKDIR, ExecResult, Limits, Sandbox

BACKENDS = ("namespace", "local")


def open_sandbox(layers: Sequence[Mapping[str, FileEntry] | str], *, backend: str = "namespace",
                 limits: Limits | None = None, store: LayerStore | None = None) -> Sandbox:
    """Open a sandbox over ``layers`` (file trees or layer ids, lowest first)."""
    store = store or LayerStore()
    ids = [x if isinstance(x, str) else store.put_tree(x) for x in layers]
    limits = limits or Limits()
    if backend == "local":
        return LocalSandbox(ids, store, limits)
    if backend == "namespace":
        from ._namespace import NamespaceSandbox

        return NamespaceSandbox(ids, store, limits)
    raise ConfigError(f"unknown sandbox backend {backend!r}", fix=f"use one of {BACKENDS}")


__all__ = ["BACKENDS", "WORKDIR", "ExecResult", "LayerStore", "Limits", "LocalSandbox",
           "LocalSandboxWarning", "Sandbox", "ceiling_home", "open_sandbox"]
