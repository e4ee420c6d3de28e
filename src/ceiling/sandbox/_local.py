"""The ``local`` backend: a temp-dir copy of the layers, **no isolation at all**.

For machines without Linux namespaces, and for debugging. Commands run as the calling user
with full access to the host and network; reset copies the layers again. It must be asked
for by name and warns on every start.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._layers import LayerStore
from ._types import WORKDIR, ExecResult, Limits


class LocalSandboxWarning(UserWarning):
    """Emitted on every start of the unisolated local backend."""


class LocalSandbox:
    backend = "local"

    def __init__(self, layer_ids: Sequence[str], store: LayerStore, limits: Limits) -> None:
        warnings.warn("ceiling sandbox backend 'local' has NO isolation: commands run on the "
                      "host as the current user", LocalSandboxWarning, stacklevel=3)
        self.store, self.limits, self.layer_ids = store, limits, list(layer_ids)
        self._root = Path(tempfile.mkdtemp(prefix="ceiling-local-"))
        self._ws = self._root / "workspace"
        self._tmp = self._root / "tmp"
        self._populate(self.layer_ids)

    def _populate(self, layer_ids: Sequence[str]) -> None:
        for d in (self._ws, self._tmp):
            shutil.rmtree(d, ignore_errors=True)
        self._tmp.mkdir(parents=True)
        self._ws.mkdir(parents=True)
        self.store.materialize(self.store.expand(layer_ids), self._ws)

    def _resolve(self, path: str) -> Path:
        p = path[len(WORKDIR):].lstrip("/") if path.startswith(WORKDIR) else path
        if p.startswith("/tmp"):
            base, rel = self._tmp, p[len("/tmp"):].lstrip("/")
        elif p.startswith("/"):
            raise PermissionError(f"{path}: outside the workspace")
        else:
            base, rel = self._ws, p
        full = (base / rel).resolve()
        if not full.is_relative_to(base.resolve()):
            raise PermissionError(f"{path}: outside the workspace")
        return full

    def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             cwd: str | None = None) -> ExecResult:
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self._ws),
                   "TMPDIR": str(self._tmp), "WORKSPACE": str(self._ws), "LANG": "C.UTF-8"}
        run_env.update(env or {})
        timeout = timeout or self.limits.command_timeout_s
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=self._resolve(cwd) if cwd else self._ws,
                                env=run_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        cap = self.limits.max_output_bytes
        truncated = len(out) > cap or len(err) > cap
        return ExecResult(proc.returncode, out[:cap].decode(errors="replace"),
                          err[:cap].decode(errors="replace"), time.perf_counter() - t0,
                          timed_out, truncated)

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
        self._populate([layer_id])

    def fork(self) -> LocalSandbox:
        return LocalSandbox([self.checkpoint()], self.store, self.limits)

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
