"""The ``local`` backend: a temp-dir copy of the layers, **no isolation at all**.

For machines without Linux namespaces (or without root), and for debugging. Commands run as
the calling user with full access to the host file system, its processes and the network;
it must be asked for by name and warns (:class:`LocalSandboxWarning`) on every start.

What it does enforce, so a runaway command cannot take the caller down with it: per command
``RLIMIT_FSIZE``, ``RLIMIT_CPU``, ``RLIMIT_AS`` (``limits.memory_mb``), ``RLIMIT_CORE=0`` and,
for non-root callers, ``RLIMIT_NPROC``; a wall-clock timeout that kills the command's process
group; output written to memfds and capped at ``limits.max_output_bytes``; ``read``/``write``
confined to the workspace and the sandbox's own tmp folder. Background processes started by a
command are killed at ``reset()``/``close()`` (every command runs in its own session, and the
sandbox remembers them). Reset copies the layers again, so it costs the workspace's size.
Run as root, file permissions do not bind (a ``chmod 000`` fault denies nothing).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from ._layers import LayerStore
from ._types import WORKDIR, ExecResult, Limits


class LocalSandboxWarning(UserWarning):
    """Emitted on every start of the unisolated local backend."""


def _kill_groups(pgids: set[int]) -> None:
    for pg in pgids:
        try:
            os.killpg(pg, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    pgids.clear()


def _cleanup(root: Path, pgids: set[int]) -> None:
    _kill_groups(pgids)
    shutil.rmtree(root, ignore_errors=True)


class LocalSandbox:
    backend = "local"
    python = sys.executable  # commands run on the host: its own interpreter

    def __init__(self, layer_ids: Sequence[str], store: LayerStore, limits: Limits) -> None:
        warnings.warn("ceiling sandbox backend 'local' has NO isolation: commands run on the "
                      "host as the current user", LocalSandboxWarning, stacklevel=3)
        self.store, self.limits = store, limits
        self.layer_ids = store.expand(layer_ids)
        self._root = Path(tempfile.mkdtemp(prefix="ceiling-local-"))
        self._ws = self._root / "workspace"
        self._tmp = self._root / "tmp"
        self._pgids: set[int] = set()
        self._finalizer = weakref.finalize(self, _cleanup, self._root, self._pgids)
        self._populate(self.layer_ids)

    def _populate(self, layer_ids: Sequence[str]) -> None:
        _kill_groups(self._pgids)
        for d in (self._ws, self._tmp):
            if d.exists():
                for dirpath, dirnames, _ in os.walk(d):  # a chmod 000 folder must not stick
                    for name in dirnames:
                        os.chmod(os.path.join(dirpath, name), 0o700)
            shutil.rmtree(d, ignore_errors=True)
        self._tmp.mkdir(parents=True)
        self._ws.mkdir(parents=True)
        self.store.materialize(layer_ids, self._ws)

    def _resolve(self, path: str) -> Path:
        p = os.path.normpath(path if path.startswith("/") else f"{WORKDIR}/{path}")
        if p == WORKDIR or p.startswith(WORKDIR + "/"):
            base, rel = self._ws, p[len(WORKDIR):].lstrip("/")
        elif p == "/tmp" or p.startswith("/tmp/"):
            base, rel = self._tmp, p[len("/tmp"):].lstrip("/")
        else:
            raise PermissionError(1, f"{path}: outside /workspace and /tmp")
        full = (base / rel).resolve()
        if not full.is_relative_to(base.resolve()):
            raise PermissionError(1, f"{path}: resolves outside /workspace and /tmp")
        return full

    def _limit(self, pid: int) -> None:
        """Apply the limits right after the spawn (no preexec_fn: it is unsafe with threads);
        the command runs unlimited for the microseconds in between."""
        lim = self.limits
        limits = [(resource.RLIMIT_FSIZE, lim.max_file_mb << 20), (resource.RLIMIT_CPU, lim.cpu_s),
                  (resource.RLIMIT_CORE, 0), (resource.RLIMIT_AS, lim.memory_mb << 20)]
        if os.geteuid() != 0:
            limits.append((resource.RLIMIT_NPROC, lim.max_processes))
        for res, value in limits:
            try:
                resource.prlimit(pid, res, (value, value))
            except (ProcessLookupError, PermissionError):
                return

    def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             cwd: str | None = None) -> ExecResult:
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else [str(a) for a in cmd]
        run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self._tmp),
                   "TMPDIR": str(self._tmp), "WORKSPACE": str(self._ws), "LANG": "C.UTF-8"}
        run_env.update(env or {})
        timeout = timeout if timeout is not None else self.limits.command_timeout_s
        fds = [os.memfd_create("ceiling", os.MFD_CLOEXEC) for _ in range(3)]
        if stdin:
            os.write(fds[0], stdin)
            os.lseek(fds[0], 0, os.SEEK_SET)
        t0 = time.perf_counter()
        timed_out = False
        try:
            try:
                work = self._resolve(cwd) if cwd else self._ws
                proc = subprocess.Popen(argv, cwd=work, env=run_env, stdin=fds[0], stdout=fds[1],
                                        stderr=fds[2], start_new_session=True)
            except OSError as e:
                return ExecResult(127 if isinstance(e, FileNotFoundError) else 126, "",
                                  f"sandbox: {e}\n", time.perf_counter() - t0)
            self._limit(proc.pid)
            self._pgids.add(proc.pid)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            cap = self.limits.max_output_bytes
            outs, truncated = [], False
            for fd in fds[1:]:
                size = os.fstat(fd).st_size
                truncated |= size > cap
                outs.append(os.pread(fd, min(size, cap), 0).decode(errors="replace"))
            return ExecResult(proc.returncode, outs[0], outs[1], time.perf_counter() - t0,
                              timed_out, truncated)
        finally:
            for fd in fds:
                os.close(fd)

    def read(self, path: str) -> bytes:
        return self._resolve(path).read_bytes()

    def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        full = self._resolve(path)
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
        if mode is not None:
            os.chmod(full, mode)

    def host_path(self) -> Path:
        return self._ws

    def reset(self) -> None:
        self._populate(self.layer_ids)

    def checkpoint(self) -> str:
        return self.store.put_dir(self._ws, snapshot=True)

    def restore(self, layer_id: str) -> None:
        self._populate(self.store.expand([layer_id]))

    def fork(self) -> LocalSandbox:
        return LocalSandbox([self.checkpoint()], self.store, self.limits)

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
