"""The ``namespace`` backend: Linux namespaces + overlayfs, reset in place in about a millisecond.

Design (chosen by measurement on the project's 2-core machines, see ``docs/sandbox.md``):

- **One long-lived holder per sandbox** (``_holder.py``): PID 1 of a new PID namespace in
  new mount, network, IPC and UTS namespaces, plus a *spawner* that stays outside the PID
  namespace but creates every command inside it, as the sandbox user, with vfork. Background
  processes of one ``exec`` (an HTTP server on the sandbox's loopback) therefore serve later
  ``exec`` calls. Measured here: a command costs ~0.3-1 ms over a bare ``subprocess.run``,
  against ≈4 ms for a ``bwrap`` launch and ≈2.6 ms for ``unshare`` per command (which would
  also kill background processes) and 4-8 ms for a fork of the Python holder (what the first
  version did). ``nsenter`` per command was rejected: same cost, and the command would not
  be a child of the namespace's PID 1. Opening costs a Python start and the root set-up
  (tens of ms); a warm pool (:mod:`._launch`) hides it for ``open_sandbox``/``fork()``.
- **Mounts live only inside the sandbox's mount namespace.** The holder mounts the overlay
  (lower = the store's layers, upper/work on a size-limited tmpfs) and builds the root
  with ``open_tree``/``mount_setattr``/``move_mount`` + ``pivot_root``; the host mount table
  never changes, and when the holder dies the kernel frees everything. ``reset()`` is one
  request: ``kill(-1, SIGKILL)`` from PID 1, drop SysV IPC, unmount and remount the state
  tmpfs and the overlay with raw ``mount(2)`` (no binaries): its cost is what the episode
  wrote (tmpfs pages to free), not the workspace size.
- **Commands are not root.** They run as the sandbox's own unprivileged uid with no
  capabilities and ``no_new_privs``, a private ``/proc`` (only sandbox PIDs), a minimal
  ``/dev`` and an empty ``/run``. So ``mount``, ``ptrace``/``kill`` of the holder or the
  host and reading root-only files fail, and a ``chmod 000`` file really denies access.
- **An explicit root, not the host.** The root is an allow-list, read-only and ``nosuid``:
  the system folders (``/usr``, ``/bin``, ``/lib*``...), a synthesized ``/etc``, the
  runtime at ``/opt/ceiling/runtime`` (python + pytest, :mod:`._runtime`; :attr:`python`)
  and the base interpreter's prefix with its site-packages masked. No checkout, venv,
  ``ceiling`` package, layer store or home folder is there (``docs/sandbox.md``).
- **Limits.** A per-sandbox cgroup (v1 or v2 ``pids`` and ``memory``) bounds fork and memory
  bombs; without writable cgroups the backend falls back to ``RLIMIT_NPROC`` (per sandbox:
  each live sandbox has its own pool uid, :mod:`._uidpool`) and ``RLIMIT_AS`` and logs a
  warning. PID 1 stays out of the cgroups; it and the spawner are never the OOM killer's
  choice (``oom_score_adj``, see ``_holder.serve_spawner``). ``RLIMIT_FSIZE``,
  ``RLIMIT_CPU`` and ``RLIMIT_CORE=0`` apply to every command; the writable state (workspace
  upper, ``/tmp``, ``/dev/shm``) is one tmpfs of ``limits.disk_mb``. Output goes to memfds
  read with ``pread`` and capped at ``limits.max_output_bytes``.
- **Freezing** (``checkpoint``, ``fork`` and so the verifier's freeze): the sandbox's
  processes are stopped (cgroup freezer; SIGSTOP from PID 1 where there is none) and the
  upper layer is copied through directory fds with ``O_NOFOLLOW`` only
  (:meth:`LayerStore.put_diff`), so nothing the sandbox controls is ever resolved by the
  host (the docker-cp symlink race). More file data than ``disk_mb`` (apparent size), a
  FIFO, socket or device, or too deep a tree raise :class:`~ceiling._errors.StateRejected`
  and store nothing.

What it does **not** isolate (the threat model is in ``docs/sandbox.md``): the allow-listed
system folders are the host's (readable where world-readable); the kernel is shared (a kernel exploit escapes); a seccomp filter
(:mod:`._seccomp`, table there) blocks the syscall families a task never needs (keyrings,
io_uring, bpf, namespaces, ptrace, vsock and packet sockets...), but a kernel bug in an
allowed syscall is out of scope; CPU time is bounded
per process (``RLIMIT_CPU``) and by the wall-clock timeout, not shared fairly; where the
kernel cannot id-map the store, sandboxes fall back to one shared uid; host-side graders reading
``host_path()`` must not follow absolute symlinks. Requires root (or CAP_SYS_ADMIN) on the
host: otherwise :class:`~ceiling._errors.SandboxUnavailable` points at the ``local`` backend.
A process that calls ``setsid`` survives its command's timeout until ``reset()``.
"""

from __future__ import annotations

import contextlib
import itertools
import marshal
import os
import socket
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Self

from .._errors import ConfigError, SandboxError, SandboxUnavailable
from . import _launch, _runtime
from ._cgroup import Cgroup
from ._launch import POOL, Holder, namespaces_available, start_holder
from ._layers import LayerStore, hold, release
from ._types import WORKDIR, ExecResult, Limits

# PATH of every command: the runtime first (python3, pytest), then the system folders.
RUN_PATH = (f"{_runtime.INSIDE}/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin"
            ":/sbin")


def _kill_session_host(sid: int, cgroup: Cgroup | None) -> None:
    """SIGKILL, from the host, every process whose session (as the host sees it) is ``sid``:
    among the sandbox's cgroup or, without a cgroup, every process on the host."""
    for _ in range(100):
        found = False
        for p in cgroup.procs() if cgroup is not None else [int(d) for d in os.listdir("/proc")
                                                             if d.isdigit()]:
            try:
                with open(f"/proc/{p}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != b"Z":
                found = True
                try:
                    os.kill(p, 9)
                except ProcessLookupError:
                    pass
        if not found:
            return
        time.sleep(0.001)


def _finish(h: Holder, store: LayerStore, stacks: list[list[str]]) -> None:
    """Close: stop the holder, then let go of the layer stacks it stood on."""
    h.stop()
    for ids in stacks:
        release(store, ids)
    stacks.clear()


class NamespaceSandbox:
    """A sandbox in its own namespaces over an overlay of store layers (see module doc)."""

    backend = "namespace"

    python = _runtime.PYTHON  # the runtime's interpreter, as commands see it (or the card's)

    def __init__(self, layer_ids: Sequence[str], store: LayerStore, limits: Limits, *,
                 network_of: NamespaceSandbox | None = None) -> None:
        """Open a sandbox over ``layer_ids``. With ``network_of`` (an open namespace
        sandbox) it joins that sandbox's network namespace (same loopback: a server one
        starts is reachable from the other on 127.0.0.1) with its own mount, PID, IPC and
        UTS namespaces, so neither sees the other's files or processes; closing either
        leaves the other working (it only loses its peer)."""
        why = _launch.namespaces_available()
        if why:
            raise SandboxUnavailable(why, fix="pass backend='local' (no isolation) or run as root")
        if limits.network:
            raise ConfigError("the namespace backend has no network (loopback only)",
                              where="Limits.network", fix="leave network=False")
        self.store, self.limits = store, limits
        self.python = limits.python or _runtime.PYTHON  # an image's python, with its packages
        self.layer_ids = store.expand(layer_ids) or [store.empty()]
        store.ensure_owned(self.layer_ids)
        self._current = list(self.layer_ids)
        self._lock = threading.Lock()
        self._seq = itertools.count()
        peer = None
        if network_of is not None:
            if not isinstance(network_of, NamespaceSandbox):
                raise ConfigError("network_of must be a namespace sandbox",
                                  where="open_sandbox(network_of=...)",
                                  fix="pass a sandbox opened with backend='namespace'")
            peer = network_of._holder().host_pid
        warm = POOL.take(store, limits) if peer is None else None
        self._h: Holder | None = warm or start_holder(self._current, store, limits,
                                                      network_of=peer)
        hold(store, self.layer_ids)  # private (fork) layers live while a stack uses them
        hold(store, self._current)
        self._stacks = [self.layer_ids, self._current]
        self._finalizer = weakref.finalize(self, _finish, self._h, store, self._stacks)
        if warm is not None:
            self._remount(self._current)  # a warm holder still shows the empty layer
        POOL.refill(store, limits)

    # -- plumbing ---------------------------------------------------------------------------
    def _holder(self) -> Holder:
        if self._h is None:
            raise SandboxError("the sandbox is closed", fix="open a new sandbox")
        return self._h

    def _request(self, req: dict[str, object], fds: Sequence[int] = (), *,
                 spawner: bool = False, timeout: float | None = 60.0) -> dict[str, object]:
        h = self._holder()
        sock = h.xsock if spawner else h.sock
        req["id"] = rid = str(next(self._seq))
        try:
            socket.send_fds(sock, [marshal.dumps(req)], list(fds))
        except OSError as e:
            raise SandboxError(f"the sandbox holder is gone ({e})",
                               fix="close this sandbox and open a new one") from None
        msg = self._reply(sock, rid, timeout)
        if msg is None:
            raise SandboxError(f"the sandbox did not answer {req['op']!r} in {timeout} s",
                               fix="close this sandbox and open a new one")
        return msg

    @staticmethod
    def _reply(sock: socket.socket, rid: str, timeout: float | None,
               final: bool = True) -> dict[str, object] | None:
        """The next message for ``rid`` (with ``final``, skip the spawner's "pid" notes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                sock.settimeout(None if deadline is None
                                else max(0.0, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise SandboxError("the sandbox holder died",
                                       fix="close this sandbox and open a new one")
                msg = marshal.loads(data)
                if msg.get("id") == rid and (not final or "pid" not in msg):
                    return msg  # type: ignore[no-any-return]
        except TimeoutError:
            return None
        finally:
            sock.settimeout(None)

    @staticmethod
    def _memfd(data: bytes = b"") -> int:
        fd = os.memfd_create("ceiling", os.MFD_CLOEXEC)
        if data:
            os.write(fd, data)
            os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def _abs(self, path: str, *, cwd: bool = False) -> str:
        p = path if path.startswith("/") else f"{self.limits.workdir}/{path}"
        return os.path.normpath(p)

    # -- the Sandbox protocol ---------------------------------------------------------------
    def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             cwd: str | None = None) -> ExecResult:
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else [str(a) for a in cmd]
        if not argv:
            raise ValueError("exec needs a command")
        run_env = {"PATH": RUN_PATH, "HOME": self.limits.home,
                   "TMPDIR": "/tmp", "WORKSPACE": self.limits.workdir, "LANG": "C.UTF-8",
                   "USER": "sandbox", "PYTHONDONTWRITEBYTECODE": "1"}
        run_env.update(self.limits.env)
        run_env.update(env or {})
        timeout = timeout if timeout is not None else self.limits.command_timeout_s
        cap = self.limits.max_output_bytes
        fds = [self._memfd(stdin or b""), self._memfd(), self._memfd()]
        t0 = time.perf_counter()
        timed_out = False
        try:
            with self._lock:
                h = self._holder()
                rid = str(next(self._seq))
                req = {"op": "exec", "id": rid, "argv": argv, "env": run_env,
                       "cwd": self._abs(cwd) if cwd else self.limits.workdir}
                data = marshal.dumps(req)
                if len(data) > 32_768:  # past a datagram's comfortable size: send a memfd
                    fds.append(self._memfd(data))
                    data = marshal.dumps({"op": "exec", "id": rid, "big": True})
                try:
                    socket.send_fds(h.xsock, [data], fds)
                except OSError as e:
                    raise SandboxError(f"the sandbox holder is gone ({e})",
                                       fix="close this sandbox and open a new one") from None
                started = self._reply(h.xsock, rid, 60, final=False)
                msg = started if started is None or "pid" not in started else \
                    self._reply(h.xsock, rid, max(0.0, timeout - (time.perf_counter() - t0)))
                if msg is None:
                    timed_out = True
                    if started is not None:
                        self._kill(int(started["pid"]))  # type: ignore[call-overload]
                    msg = self._reply(h.xsock, rid, 30)
                    if msg is None:
                        raise SandboxError("a timed-out command could not be killed",
                                           fix="close this sandbox and open a new one")
            duration = time.perf_counter() - t0
            if "error" in msg:
                return ExecResult(126, "", f"sandbox: {msg['error']}\n", duration, timed_out)
            code = os.waitstatus_to_exitcode(int(msg["status"]))  # type: ignore[call-overload]
            outs = []
            truncated = False
            for fd in fds[1:]:
                size = os.fstat(fd).st_size
                truncated |= size > cap
                outs.append(os.pread(fd, min(size, cap), 0).decode(errors="replace"))
            return ExecResult(code, outs[0], outs[1], duration, timed_out, truncated)
        finally:
            for fd in fds:
                os.close(fd)

    def _kill(self, host_pid: int) -> None:
        """SIGKILL a command's session; PID 1 needs the pid as its namespace sees it. If PID 1
        does not answer within 5 s (stopped, frozen, gone), the host, root, kills the session
        itself: a command's timeout always holds."""
        try:
            with open(f"/proc/{host_pid}/status") as f:
                ns_pid = next(int(line.split()[-1]) for line in f if line.startswith("NSpid:"))
        except (OSError, StopIteration, ValueError):
            return  # it has already gone
        try:
            self._request({"op": "kill", "pid": ns_pid}, timeout=5.0)
        except SandboxError:
            h = self._holder()
            _kill_session_host(host_pid, h.cgroup)

    def _file(self, op: str, path: str, fd: int, mode: int | None = None) -> None:
        with self._lock:
            msg = self._request({"op": op, "path": self._abs(path), "mode": mode}, [fd])
        err = int(msg.get("errno", 0))  # type: ignore[call-overload]
        if err:
            text = f"{path}: {msg.get('msg', os.strerror(err))}"
            if err == 2:
                raise FileNotFoundError(err, text)
            if err == 21:
                raise IsADirectoryError(err, text)
            if err in (1, 13):
                raise PermissionError(err, text)
            raise OSError(err, text)

    def read(self, path: str) -> bytes:
        fd = self._memfd()
        try:
            self._file("read", path, fd)
            return os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)

    def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        fd = self._memfd(data)
        try:
            self._file("write", path, fd, mode)
        finally:
            os.close(fd)

    def host_path(self) -> Path:
        return Path(f"/proc/{self._holder().host_pid}/root{WORKDIR}")

    def _remount(self, lowers: list[str] | None) -> None:
        with self._lock:
            msg = self._request({"op": "reset", "lowers": lowers})
        if not msg.get("ok"):
            raise SandboxError(f"reset failed: {msg.get('msg')}",
                               fix="close this sandbox and open a new one")

    def _set_current(self, stack: list[str]) -> None:
        if stack == self._current:
            return
        hold(self.store, stack)
        release(self.store, self._current)
        self._current = self._stacks[1] = stack

    def reset(self) -> None:
        same = self._current == self.layer_ids
        self._remount(None if same else list(self.layer_ids))
        self._set_current(list(self.layer_ids))

    # -- freezing the state (checkpoint, fork and so the verifier's freeze) -----------------
    def _upper(self) -> int:
        """The overlay upper folder as an open fd. Resolved: the holder's root (a magic link)
        then folders only root can change (``/.ceiling`` is 0700 root's, ``state`` and
        ``upper`` are made by PID 1), so nothing the sandbox controls is followed here."""
        h = self._holder()
        try:
            if h.proc.poll() is not None:  # its PID 1 is gone too, and its pid may be reused
                raise OSError("the holder has exited")
            return os.open(f"/proc/{h.host_pid}/root/.ceiling/state/upper",
                           os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            raise SandboxError(f"cannot reach the sandbox's state to freeze it ({e})",
                               fix="close this sandbox and open a new one") from None

    def _pause(self, h: Holder) -> str | None:
        """Stop every process of the sandbox: the cgroup freezer (invisible to them), else
        PID 1 sends SIGSTOP to every process of the namespace (visible: a process the agent
        stopped itself is continued afterwards). Returns how ("signal?" when PID 1 did not
        confirm that every process stopped: the copy is then still safe, it follows nothing,
        but may mix two moments and refuse with StateRejected "changed")."""
        if h.cgroup is not None and h.cgroup.freeze():
            return "cgroup"
        try:
            msg = self._request({"op": "pause", "stop": True}, timeout=10)
        except (SandboxError, OSError):  # the holder is gone: _upper() says so
            return "signal?"
        return "signal" if msg.get("ok") else "signal?"

    def _resume(self, h: Holder, how: str | None) -> None:
        """Undo :meth:`_pause` (also after a partial SIGSTOP); errors of a dead holder are
        left to the caller's own error, never raised over it."""
        try:
            if how == "cgroup":
                assert h.cgroup is not None
                h.cgroup.thaw()
            elif how in ("signal", "signal?"):
                self._request({"op": "pause", "stop": False}, timeout=10)
        except (SandboxError, OSError):
            pass

    def _freeze(self, *, private: bool) -> str:
        """Pause the sandbox, copy its upper layer into the store (fd-relative, no-follow;
        see :meth:`LayerStore.put_diff`), resume it. Call with ``self._lock`` held. Raises
        :class:`~ceiling._errors.StateRejected` (nothing stored) when the state holds more
        than ``limits.disk_mb`` of data or a special file."""
        h = self._holder()
        how = self._pause(h)
        try:
            upper = self._upper()
            try:
                return self.store.put_diff(upper, self._current, private=private,
                                           max_bytes=self.limits.disk_mb << 20)
            finally:
                os.close(upper)
        finally:
            self._resume(h, how)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Every process of the sandbox stopped for the duration (as for a freeze), so the
        host can read its live files from one moment, e.g. a verifier scanning a state that
        could not be frozen. Reading must still follow nothing (the paths are the
        sandbox's); ``exec`` and the other calls wait until the block ends."""
        with self._lock:
            h = self._holder()
            how = self._pause(h)
            try:
                yield
            finally:
                self._resume(h, how)

    def checkpoint(self) -> str:
        with self._lock:
            for lid in self._current:  # a public layer must not stand on a private one
                self.store.publish(lid)
            return self._freeze(private=False)

    def restore(self, layer_id: str) -> None:
        stack = self.store.expand([layer_id])
        self._remount(stack)
        self._set_current(stack)

    def fork(self) -> NamespaceSandbox:
        """A new sandbox over a *private* frozen copy of this one's state: the layer is
        deleted when the last sandbox standing on it closes (unless a ``checkpoint()`` on
        top of it published it), so a verifier forking every episode does not grow the
        store. The copy is taken as :meth:`checkpoint` takes it (paused, no-follow) and
        raises :class:`~ceiling._errors.StateRejected` for the same reasons."""
        with self._lock:
            lid = self._freeze(private=True)
        try:
            return NamespaceSandbox([lid], self.store, self.limits)
        except BaseException:
            self.store.remove_private(lid)
            raise

    def close(self) -> None:
        if self._h is not None:
            self._finalizer()
            self._h = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["NamespaceSandbox", "namespaces_available"]
