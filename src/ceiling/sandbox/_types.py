"""The sandbox contract shared by every backend.

A sandbox holds one episode's workspace: a stack of read-only layers plus a writable upper
layer. Commands see the workspace at :data:`WORKDIR` (``/workspace``) and a private
``/tmp``. ``reset()`` returns to the initial layers, ``checkpoint()`` freezes the current
state into a new layer, ``fork()`` starts a second sandbox from the current state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

if TYPE_CHECKING:
    from ._layers import LayerStore

WORKDIR = "/workspace"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+-]*$")
# Top-level folders a card's mount point (workspace, home) may never be in or over: the
# allow-listed system folders, the sandbox's own mounts, the runtime, the store.
RESERVED_TOPS = frozenset({"proc", "sys", "dev", "run", "etc", "usr", "bin", "sbin", "lib",
                           "lib32", "lib64", "libx32", "boot", ".ceiling", "workspace"})


def check_mount_point(path: str, *, field: str = "path") -> str:
    """A card-chosen absolute folder inside the sandbox (the workspace's mount point, the
    home folder): absolute and normal (no ``..``, ``.``, ``//``, trailing ``/``), plain
    names, never ``/`` nor in or over a reserved top-level folder (``RESERVED_TOPS``) nor
    ``/opt/ceiling``. ``/tmp`` itself (the default home) and ``/workspace`` (the default
    workspace) are allowed as they are. Checked here and again by the holder; nothing of
    the host is resolved: the path only ever names a folder of the sandbox's own root."""
    if path in ("/tmp", WORKDIR):
        return path
    parts = path.split("/")
    if not path.startswith("/") or len(parts) < 2 or any(not _NAME.match(x) for x in parts[1:]):
        raise ValueError(f"{field} {path!r} must be an absolute folder of plain names "
                         "(letters, digits, '._+-'; no '..', no empty part), e.g. '/app'")
    if parts[1] in RESERVED_TOPS or parts[1] == "tmp" or path.startswith("/opt/ceiling") \
            or path == "/opt":
        raise ValueError(f"{field} {path!r} is in or over a folder the sandbox reserves "
                         f"({', '.join(sorted(RESERVED_TOPS))}, /tmp, /opt/ceiling)")
    return path


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What one command did. ``stdout``/``stderr`` are decoded UTF-8 (invalid bytes
    replaced) and capped at the sandbox's ``max_output_bytes`` each; ``truncated`` says
    whether anything was cut. ``exit_code`` is -signal when killed by a signal."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Limits(BaseModel):
    """Resource limits applied to every command in the sandbox."""

    model_config = ConfigDict(extra="forbid")

    memory_mb: int = Field(default=1024, ge=16)
    max_processes: int = Field(default=256, ge=4)
    max_file_mb: int = Field(default=256, ge=1)
    disk_mb: int = Field(default=512, ge=1)  # size of the writable upper layer (workspace + /tmp)
    cpu_s: int = Field(default=120, ge=1)
    command_timeout_s: float = Field(default=30.0, gt=0)
    max_output_bytes: int = Field(default=1 << 20, ge=64)
    network: bool = False  # loopback only inside the sandbox when False
    # Layout (issue 15; namespace backend): where the workspace shows, the home folder, the
    # card's image layers (root-owned folders of the image store, lowest first), the
    # environment every command gets and the interpreter graders run inside.
    workdir: str = WORKDIR
    home: str = "/tmp"
    rootfs: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    python: str | None = None

    @field_validator("workdir", "home")
    @classmethod
    def _mount_point(cls, v: str, info: ValidationInfo) -> str:
        return check_mount_point(v, field=f"Limits.{info.field_name}")

    @field_validator("python")
    @classmethod
    def _python(cls, v: str | None) -> str | None:
        if v is not None and (not v.startswith("/") or "\0" in v):
            raise ValueError("python must be an absolute path inside the sandbox")
        return v


@runtime_checkable
class Sandbox(Protocol):
    """An isolated, resettable workspace. Every backend implements this protocol."""

    backend: str
    limits: Limits
    layer_ids: list[str]
    """The layer stack this sandbox was opened over (lowest first), in :attr:`store`."""
    store: LayerStore
    """Where its layers live; ``fork`` and the verifier's milestone checks open new
    sandboxes over a frozen state's layers from it."""
    python: str
    """The python interpreter to put in an argv run *inside* this sandbox (namespace:
    ``/opt/ceiling/runtime/bin/python3``, the runtime with pytest; local: the host's
    ``sys.executable``). Never put the host's ``sys.executable`` in a sandbox's argv."""

    def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             cwd: str | None = None) -> ExecResult:
        """Run ``cmd`` (a shell string run by ``/bin/sh -c``, or an argv list) with cwd
        ``/workspace``. Kills the whole process tree at ``timeout`` (default
        ``limits.command_timeout_s``). Never raises for a failing command."""
        ...

    def read(self, path: str) -> bytes:
        """Bytes of a file, ``path`` relative to /workspace (or absolute under /workspace or
        /tmp). Raises FileNotFoundError / IsADirectoryError / PermissionError; refuses paths
        that escape the workspace (including through symlinks) with PermissionError."""
        ...

    def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Create or replace a file (parents created). Same path rules as ``read``."""
        ...

    def host_path(self) -> Path:
        """The merged workspace as a host path, for graders that only read files.
        Treat it as read-only and never follow its symlinks out of it."""
        ...

    def reset(self) -> None:
        """Back to the initial layers: the upper layer and every process are discarded."""
        ...

    def checkpoint(self) -> str:
        """Freeze the current workspace into a new layer; return the layer id."""
        ...

    def restore(self, layer_id: str) -> None:
        """Make the workspace equal to a checkpoint taken from this sandbox (or a fork)."""
        ...

    def fork(self) -> Sandbox:
        """A second, independent sandbox that starts from this one's current state."""
        ...

    def close(self) -> None:
        """Release everything: processes, mounts, temp folders. Idempotent."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...
