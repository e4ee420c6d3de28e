"""Starting holders (see :mod:`._namespace`) and keeping a few warm.

``start_holder`` launches ``_holder.py`` and waits until it has built the sandbox root.
:class:`HolderPool` keeps one started holder per (store, limits) idle in the background, so
``open_sandbox``/``fork()`` take it and only remount its overlay over the wanted layers (one
``reset`` request, about a millisecond) instead of paying a Python start-up and the root
set-up (tens of milliseconds, hundreds on a loaded 2-core machine). Idle holders are killed
at interpreter exit (and exit by themselves if this process dies); ``drain()`` kills them
now. ``CEILING_SANDBOX_POOL=0`` turns the pool off.
"""

from __future__ import annotations

import atexit
import marshal
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from .._errors import ConfigError, SandboxUnavailable
from . import _runtime as runtime
from . import _seccomp, _uidpool
from ._cgroup import Cgroup, log
from ._layers import SANDBOX_GID, SANDBOX_UID, LayerStore
from ._types import WORKDIR, Limits
from ._uidpool import UidLease

HOLDER = str(Path(__file__).with_name("_holder.py"))
IDMAP = True  # False: behave as on a kernel without id-mapped mounts (shared uid 61000)
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def namespaces_available() -> str | None:
    """None when the namespace backend can run here, else the reason it cannot."""
    if sys.platform != "linux":
        return f"Linux namespaces are not available on {sys.platform}"
    if os.geteuid() != 0:
        return "the namespace backend needs root (mounts and cgroups are set up by the host)"
    return None


class Holder:
    """The host's handle on one holder process (everything ``close`` must release): the
    spawner (``proc``), PID 1 (``host_pid``, with a pidfd so a reused pid is never hit), the
    cgroups, the pool uid (``uid``; ``lease`` keeps it taken)."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket, xsock: socket.socket,
                 host_pid: int, cgroup: Cgroup | None, lease: UidLease | None = None,
                 uid: int = SANDBOX_UID) -> None:
        self.proc, self.sock, self.xsock, self.cgroup = proc, sock, xsock, cgroup
        self.host_pid, self.lease, self.uid = host_pid, lease, uid
        self.cmd_adj = 0  # the oom_score_adj commands run at (see _holder.serve_spawner)
        try:
            self.pidfd = os.pidfd_open(host_pid)
        except OSError:
            self.pidfd = -1

    def kill_pid1(self) -> None:
        if self.pidfd >= 0:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:
                pass

    def stop(self) -> None:
        """Kill everything, whatever state it is in (blocked, stopped, frozen): thaw the
        cgroup, SIGKILL PID 1 (the kernel then kills its whole PID namespace) and the
        spawner, SIGKILL whatever is left in the cgroups, wait for PID 1 to be gone, remove
        the groups, free the uid. Idempotent."""
        if self.cgroup is not None:
            try:
                self.cgroup.thaw()  # frozen tasks (cgroup v1) would not die
            except (OSError, AttributeError):
                pass
        self.kill_pid1()
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        if self.cgroup is not None:
            self.cgroup.kill_all()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.pidfd >= 0:  # readable once PID 1 (so its whole namespace) has exited
            select.select([self.pidfd], [], [], 10)
            os.close(self.pidfd)
            self.pidfd = -1
        self.sock.close()
        self.xsock.close()
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.lease is not None:
            self.lease.release()


def _netns_fd(host_pid: int) -> int:
    """An fd on the network namespace of the holder whose PID 1 is ``host_pid`` (network_of),
    checked to still be that sandbox's init once the fd is open (a pid can be reused)."""
    try:
        pidfd = os.pidfd_open(host_pid)
        try:
            fd = os.open(f"/proc/{host_pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            with open(f"/proc/{host_pid}/comm") as f:
                alive = f.read().strip() == "ceiling-init"
            if not alive or select.select([pidfd], [], [], 0)[0]:  # readable: it exited
                os.close(fd)
                raise OSError("its PID 1 has exited")
            return fd
        finally:
            os.close(pidfd)
    except OSError as e:
        raise SandboxUnavailable(f"cannot join the network of the given sandbox: {e}",
                                 fix="pass network_of= a sandbox that is open") from None


def _layout_cfg(limits: Limits, cfg: dict[str, object]) -> dict[str, object]:
    """The holder's layout keys (workdir, home, rootfs), checked against the rest of the
    root: a mount point must not cover nor sit inside a folder the root shows (the runtime,
    the base interpreter, ``CEILING_SANDBOX_PATHS``), and every image layer must be a
    root-owned folder of the image store that nobody else can write (``_image``)."""
    from ._image import check_layer_dir

    paths = cfg.get("paths") or []
    shown = [str(cfg["base_prefix"]), *(str(p) for p in paths),  # type: ignore[attr-defined]
             runtime.INSIDE]
    for name in ("workdir", "home"):
        point = getattr(limits, name)
        if point in ("/tmp", WORKDIR):
            continue
        for p in shown:
            if p == point or p.startswith(point + "/") or point.startswith(p + "/"):
                raise ConfigError(f"the sandbox's {name} {point!r} would cover or sit inside "
                                  f"{p!r}, which the sandbox root shows", where=f"Limits.{name}",
                                  fix="choose another folder (e.g. /app, /home/agent)")
    if limits.workdir != WORKDIR and limits.home != "/tmp" and (
            limits.home == limits.workdir or limits.home.startswith(limits.workdir + "/")
            or limits.workdir.startswith(limits.home + "/")):
        raise ConfigError(f"workdir {limits.workdir!r} and home {limits.home!r} overlap",
                          where="Limits.home", fix="put the home folder elsewhere")
    return {"workdir": limits.workdir, "home": limits.home,
            "rootfs": [check_layer_dir(p) for p in limits.rootfs]}


def start_holder(lowers: list[str], store: LayerStore, limits: Limits,
                 network_of: int | None = None, rt: runtime.Runtime | None = None) -> Holder:
    """Start a holder over ``lowers``; with ``network_of`` (the host pid of another
    sandbox's PID 1) it joins that sandbox's network namespace instead of making one.
    ``rt`` is the sandbox root to use (default: the current one, read from the
    environment now; the warm pool passes the one its key was computed from)."""
    why = namespaces_available()
    if why:
        raise SandboxUnavailable(why, fix="pass backend='local' (no isolation) or run as root")
    lease = _uidpool.acquire()
    cgroup = Cgroup.create(limits)
    rlimits = {"RLIMIT_FSIZE": limits.max_file_mb << 20, "RLIMIT_CPU": limits.cpu_s,
               "RLIMIT_CORE": 0, "RLIMIT_NOFILE": 4096}
    if cgroup is None or not cgroup.pids:
        rlimits["RLIMIT_NPROC"] = limits.max_processes
    if cgroup is None or not cgroup.memory:
        rlimits["RLIMIT_AS"] = limits.memory_mb << 20
    cfg = {"uid": lease.uid, "gid": lease.gid, "store_uid": SANDBOX_UID,
           "store_gid": SANDBOX_GID, "cgroups": [str(d) for d in cgroup.dirs] if cgroup else [],
           "read_cap": max(limits.disk_mb, limits.max_file_mb) << 20, "disk_mb": limits.disk_mb,
           "inodes": max(4096, limits.disk_mb * 256), "lowers": lowers,
           "store": str(store.root.resolve()), "rlimits": rlimits}
    memcg = cgroup.memory_dir if cgroup is not None else None
    if memcg is not None:  # the spawner stays out of it but to spawn (_holder.memcg_fds)
        cfg["memcg"] = str(memcg)
    if not IDMAP:  # tests of the fall-back (a kernel without id-mapped mounts)
        cfg["userns_error"] = "id-mapped store turned off (_launch.IDMAP)"
    cfg.update((rt or runtime.current()).holder_cfg())  # the allow-listed root (_runtime)
    cfg.update(_layout_cfg(limits, cfg))
    cfg["seccomp"] = _seccomp.program()  # installed by the spawner on every command
    netfd = None if network_of is None else _netns_fd(network_of)
    if netfd is not None:
        cfg["netns_fd"] = netfd
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    xparent, xchild = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ready_r, ready_w = os.pipe()
    # The holder's command line is PID 1's, which commands can read (/proc/1/cmdline): it
    # names no host path they cannot see. The base interpreter (shown in the sandbox anyway;
    # -I -S needs no venv) runs the script from an fd, and the config comes in a memfd.
    script = os.open(HOLDER, os.O_RDONLY | os.O_CLOEXEC)
    cfg_fd = os.memfd_create("ceiling-holder-cfg", os.MFD_CLOEXEC)
    os.write(cfg_fd, marshal.dumps(cfg))
    keep = (child.fileno(), xchild.fileno(), ready_r, ready_w)
    extra_fds = (lease.fd,) if netfd is None else (netfd, lease.fd)  # holders keep the uid
    try:
        proc = subprocess.Popen([runtime.base_python(), "-I", "-S", f"/proc/self/fd/{script}",
                                 *map(str, keep[:2]), str(cfg_fd), *map(str, keep[2:])],
                                pass_fds=keep + extra_fds + (script, cfg_fd),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env={"PATH": _PATH})
    finally:
        child.close()
        xchild.close()
        os.close(ready_r)
        os.close(ready_w)
        os.close(script)
        os.close(cfg_fd)
        if netfd is not None:
            os.close(netfd)
    parent.settimeout(30)
    try:
        msg = marshal.loads(parent.recv(65536) or marshal.dumps({"ready": False}))
    except (OSError, ValueError, EOFError, TypeError) as e:
        msg = {"ready": False, "msg": str(e)}
    if not msg.get("ready"):
        proc.kill()
        err = proc.communicate()[1].decode(errors="replace").strip().splitlines()
        parent.close()
        xparent.close()
        if cgroup is not None:
            cgroup.remove()
        lease.release()
        why = msg.get("msg") or (err[-1] if err else "holder exited")
        raise SandboxUnavailable(f"cannot create the namespace sandbox: {why}",
                                 fix="use backend='local' (no isolation) on this machine")
    assert proc.stderr is not None
    proc.stderr.close()
    parent.settimeout(None)
    if cgroup is not None:  # commands inherit the spawner's groups; PID 1 stays out of them
        cgroup.add(proc.pid)
    if msg.get("warn"):
        _warn_shared_uid(str(msg["warn"]))
    h = Holder(proc, parent, xparent, msg["host_pid"], cgroup, lease, int(msg["uid"]))
    h.cmd_adj = int(msg.get("cmd_adj", 0))
    return h


_warned_uid = False


def _warn_shared_uid(why: str) -> None:
    global _warned_uid
    if not _warned_uid:
        _warned_uid = True
        log.warning("sandbox: %s (sandboxes then share per-uid kernel limits)", why)


class HolderPool:
    """At most :attr:`per_key` idle, pre-started holders per (store root, limits), and at
    most :attr:`max_idle` in all (the oldest key's are stopped first): a test suite that
    gives every test its own store does not pile up processes. Two per key because an
    episode opens two sandboxes back to back (its own, then the verifier's ``fork()`` of
    its final state): with one spare the grading fork started its holder cold (about 60 ms
    on the grading's critical path)."""

    per_key = 2
    max_idle = 4

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[str, list[Holder]] = {}
        self._starting: set[str] = set()
        self._threads: list[threading.Thread] = []

    @staticmethod
    def enabled() -> bool:
        return os.environ.get("CEILING_SANDBOX_POOL", "1") != "0"

    @staticmethod
    def key(store: LayerStore, limits: Limits, rt: runtime.Runtime | None = None) -> str:
        """What a started holder depends on (timeouts and output caps are host-side)."""
        held = limits.model_dump(include={"memory_mb", "max_processes", "max_file_mb",
                                          "disk_mb", "cpu_s", "workdir", "home", "rootfs"})
        rt = rt or runtime.current()
        return f"{store.root.resolve()}\0{sorted(held.items())}\0{rt.key()}"

    def take(self, store: LayerStore, limits: Limits) -> Holder | None:
        """An idle holder (its overlay still over the empty layer), or None."""
        if not self.enabled():
            return None
        with self._lock:
            idle = self._idle.get(self.key(store, limits)) or []
            h = idle.pop() if idle else None
        if h is not None and h.proc.poll() is not None:
            h.stop()
            return None
        return h

    def refill(self, store: LayerStore, limits: Limits) -> None:
        """Start a spare holder in the background unless one is idle or starting. Called
        after an open completes, so the start-up does not compete with the open itself."""
        if not self.enabled():
            return
        rt = runtime.current()
        self._start(self.key(store, limits, rt), rt, store, limits)

    def _start(self, k: str, rt: runtime.Runtime, store: LayerStore, limits: Limits) -> None:
        # The root is read from the environment once, by the caller's thread: the
        # background start builds the holder the key names even if the environment
        # changes meanwhile (and never raises a configuration error in a thread).
        with self._lock:
            if len(self._idle.get(k) or ()) >= self.per_key or k in self._starting:
                return
            self._starting.add(k)
            t = threading.Thread(target=self._fill, args=(k, rt, store, limits), daemon=True,
                                 name="ceiling-sandbox-pool")
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
            t.start()

    def _fill(self, k: str, rt: runtime.Runtime, store: LayerStore, limits: Limits) -> None:
        try:
            h = start_holder([store.empty()], store, limits, rt=rt)
        except Exception:  # noqa: BLE001 - a failed warm start only costs the next open time
            h = None
        evicted: list[Holder] = []
        again = False
        with self._lock:
            self._starting.discard(k)
            if h is not None:
                self._idle.setdefault(k, []).append(h)
            while sum(map(len, self._idle.values())) > self.max_idle:
                oldest = next(iter(self._idle))
                evicted += self._idle.pop(oldest)
            again = h is not None and 0 < len(self._idle.get(k) or ()) < self.per_key
        for old in evicted:
            old.stop()
        if again:  # the second spare, started after the first (never two starts at once)
            self._start(k, rt, store, limits)

    def settle(self) -> None:
        """Wait for the background starts in flight (a start may chain one more)."""
        for _ in range(self.per_key + 1):
            with self._lock:
                alive = [t for t in self._threads if t.is_alive()]
            if not alive:
                return
            for t in alive:
                t.join(timeout=60)

    def drain(self) -> None:
        """Kill every idle holder (waits for background starts to finish first)."""
        self.settle()
        with self._lock:
            idle, self._idle = self._idle, {}
        for hs in idle.values():
            for h in hs:
                h.stop()


POOL = HolderPool()
atexit.register(POOL.drain)
