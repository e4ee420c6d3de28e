"""Sandboxes: isolated, layered workspaces that reset in about a millisecond.

``open_sandbox(layers, backend=...)`` is the one door. ``layers`` are file trees or layer
ids (a checkpoint id brings its parents), lowest first. Backends:

- ``namespace`` (default; Linux, root): commands run as an unprivileged user in their own
  mount, PID, network (loopback only), IPC and UTS namespaces over an overlay of the layers,
  seeing an allow-listed root (system folders, a minimal /etc and the *runtime*: python +
  pytest, ``runtime`` = :mod:`ceiling.sandbox._runtime`), never ceiling nor the host's
  checkouts; see :mod:`ceiling.sandbox._namespace` for the design and what it does *not*
  isolate. ``sandbox.python`` is the interpreter to run inside it.
- ``local``: a temp-dir copy with no isolation; must be asked for by name and warns
  (:class:`LocalSandboxWarning`) on every start.

See ``docs/sandbox.md``; ``ceiling bench sandbox --json`` measures it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._errors import ConfigError
from .._tree import FileEntry
from . import _runtime as runtime
from ._bench import run_bench
from ._image import (
    RESERVED,
    FilesStep,
    ImageBuildError,
    RunStep,
    RuntimeStep,
    build_image,
    python_version,
)
from ._launch import namespaces_available
from ._layers import SANDBOX_UID, LayerStore, ceiling_home
from ._local import LocalSandbox, LocalSandboxWarning
from ._types import WORKDIR, ExecResult, Limits, Sandbox, check_mount_point

BACKENDS = ("namespace", "local")


def open_sandbox(layers: Sequence[Mapping[str, FileEntry] | str], *, backend: str = "namespace",
                 limits: Limits | None = None, store: LayerStore | None = None,
                 network_of: Sandbox | None = None) -> Sandbox:
    """Open a sandbox over ``layers`` (file trees or layer ids, lowest first).

    ``network_of``: another open namespace sandbox whose network (loopback) the new one
    joins, with its own files, processes and uid; for a trusted service next to a subject.
    The local backend shares the host's network anyway and ignores it.

    Raises :class:`~ceiling._errors.SandboxUnavailable` (naming the ``local`` backend) when
    the namespace backend cannot run here, :class:`~ceiling._errors.ConfigError` for an
    unknown backend, :class:`~ceiling._errors.SandboxError` for an unknown layer id.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"unknown sandbox backend {backend!r}", fix=f"use one of {BACKENDS}")
    store = store or LayerStore()
    ids = [x if isinstance(x, str) else store.put_tree(x) for x in layers]
    limits = limits or Limits()
    if backend == "local":
        return LocalSandbox(ids, store, limits)
    from ._namespace import NamespaceSandbox

    if network_of is not None and not isinstance(network_of, NamespaceSandbox):
        raise ConfigError("network_of must be a namespace sandbox",
                          where="open_sandbox(network_of=...)",
                          fix="open both sandboxes with backend='namespace'")
    return NamespaceSandbox(ids, store, limits, network_of=network_of)


__all__ = [
    "BACKENDS",
    "RESERVED",
    "SANDBOX_UID",
    "WORKDIR",
    "ExecResult",
    "FilesStep",
    "ImageBuildError",
    "LayerStore",
    "Limits",
    "LocalSandbox",
    "LocalSandboxWarning",
    "RunStep",
    "RuntimeStep",
    "Sandbox",
    "build_image",
    "ceiling_home",
    "check_mount_point",
    "namespaces_available",
    "open_sandbox",
    "python_version",
    "run_bench",
    "runtime"
]
