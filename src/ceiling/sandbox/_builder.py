"""The build sandbox of one image layer (run as a script by :mod:`._image`, never imported).

``python -I -S _builder.py CONFIG_FD`` starts as host root with a JSON config (a memfd):
``mnt`` (an empty host folder: the new root's mount point), ``upper``/``work`` (empty host
folders for the overlays' upper and work dirs, one sub-folder per overlay), ``lowers`` (the
parent layers' root folders, lowest first, plus the step's own file trees), ``etc`` (a
prepared /etc for the build: the host's package-manager configuration, never its secrets),
``run``, ``cwd``, ``env``, ``timeout``, ``seccomp`` (hex), ``log`` (an fd number for the
step's output).

It unshares mount, PID, IPC, UTS and network namespaces: the build's network is a loopback
whose ``127.0.0.1:3128`` the host's registry proxy serves (:mod:`._proxy`: the package
registries and nothing else; ``network``), and forks; the child, PID 1 of the new PID namespace,
builds a root from an allow-list and never from the host's ``/``:

- ``/`` is an overlay of the parent layers over a skeleton; writes land in ``upper/root``;
- the host's system folders (``/usr``, ``/lib*``...) and the package managers' state
  (``/var/lib/dpkg``, ``/var/lib/apt``, ``/var/cache/apt``, ``/var/cache/debconf``) are
  read-only lowers of their own overlays (writes land in ``upper/<n>``); ``/etc`` is the
  prepared folder under the layers' own ``etc``;
- a fresh ``/proc`` with ``/proc/sys`` and ``/proc/sysrq-trigger`` read-only, a minimal
  ``/dev``, tmpfs ``/tmp``, ``/run``, an empty ``/sys``.

It then ``pivot_root``s, drops every capability outside Docker's default set but for
``CAP_MKNOD`` and ``CAP_NET_RAW`` (so no mount, no module, no raw device, no ptrace, no
sysctl), sets ``no_new_privs``, installs the sandbox's seccomp filter and one refusing
``socket(AF_UNIX)`` (the host's abstract unix sockets are in its network namespace), and
runs ``/bin/sh -c RUN`` as root in ``cwd``. The host then freezes the upper folders (:mod:`._image`). When
the host dies the builder gets SIGKILL (parent-death signal) and the kernel tears the
namespaces down; nothing here writes any host path but the upper folders.
"""

import ctypes
import json
import os
import signal
import struct
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID = 0x00020000, 0x04000000, 0x08000000, \
    0x20000000
CLONE_NEWNET = 0x40000000
PROXY_PORT = 3128
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}[os.uname().machine]
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
STATE_DIRS = ("var/lib/dpkg", "var/lib/apt", "var/cache/apt", "var/cache/debconf")
# Docker's default capabilities less CAP_MKNOD (27) and CAP_NET_RAW (13).
KEEP_CAPS = {0, 1, 3, 4, 5, 6, 7, 8, 10, 29, 31}  # chown dac_override fowner fsetid kill
# setgid setuid setpcap net_bind_service audit_write setfcap
OPTS = "redirect_dir=off,metacopy=off,index=off"

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                       ctypes.c_char_p]


def _check(rc: int, what: str) -> None:
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def mount(src, dst, fstype, flags, data=None) -> None:  # type: ignore[no-untyped-def]
    enc = (lambda s: s.encode() if s is not None else None)
    _check(libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {dst}")


def overlay(dst: str, lowers: list[str], upper: str, work: str) -> None:
    os.makedirs(upper, 0o755, exist_ok=True)
    os.makedirs(work, 0o700, exist_ok=True)
    mount("overlay", dst, "overlay", MS_NOSUID | MS_NODEV,
          f"lowerdir={':'.join(lowers)},upperdir={upper},workdir={work},{OPTS}")


def build_root(cfg: dict) -> str:
    """Mount the build's root at ``cfg["mnt"]`` (see the module doc) and return it."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    new, up, wk = cfg["mnt"], cfg["upper"], cfg["work"]
    layers = list(reversed(cfg["lowers"]))  # highest first, as overlayfs wants
    skel = cfg["skel"]
    for name in ("proc", "sys", "dev", "tmp", "run", "etc", "root", "var/lib", "var/cache",
                 "var/log/apt", "var/tmp"):
        os.makedirs(f"{skel}/{name}", 0o755, exist_ok=True)
    os.chmod(f"{skel}/var/tmp", 0o1777)
    for name in SYSTEM:  # merged /usr: the host's links, else mount points
        if os.path.islink("/" + name):
            os.symlink(os.readlink("/" + name), f"{skel}/{name}")
        elif os.path.isdir("/" + name):
            os.makedirs(f"{skel}/{name}", 0o755, exist_ok=True)
    os.chmod(f"{skel}/root", 0o700)
    os.chmod(f"{skel}/tmp", 0o1777)
    overlay(new, [*layers, skel], f"{up}/root", f"{wk}/root")
    n = 0
    for name in SYSTEM:
        host = "/" + name
        if os.path.islink(host) or not os.path.isdir(host):
            continue  # merged /usr: the skeleton's link
        lows = [f"{x}/{name}" for x in layers if os.path.isdir(f"{x}/{name}")
                and not os.path.islink(f"{x}/{name}")]
        n += 1
        overlay(f"{new}/{name}", [*lows, host], f"{up}/sys{n}", f"{wk}/sys{n}")
        cfg.setdefault("merge", []).append([f"sys{n}", name])
    for rel in STATE_DIRS:
        if not os.path.isdir("/" + rel):
            continue
        lows = [f"{x}/{rel}" for x in layers if os.path.isdir(f"{x}/{rel}")
                and not os.path.islink(f"{x}/{rel}")]
        n += 1
        os.makedirs(f"{new}/{rel}", 0o755, exist_ok=True)
        overlay(f"{new}/{rel}", [*lows, "/" + rel], f"{up}/sys{n}", f"{wk}/sys{n}")
        cfg.setdefault("merge", []).append([f"sys{n}", rel])
    lows = [f"{x}/etc" for x in layers if os.path.isdir(f"{x}/etc")
            and not os.path.islink(f"{x}/etc")]
    overlay(f"{new}/etc", [*lows, cfg["etc"]], f"{up}/etc", f"{wk}/etc")
    cfg.setdefault("merge", []).append(["etc", "etc"])
    mount("proc", f"{new}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for p in ("sys", "sysrq-trigger", "bus", "fs", "irq"):
        if os.path.exists(f"{new}/proc/{p}"):
            mount(f"{new}/proc/{p}", f"{new}/proc/{p}", None, MS_BIND | MS_REC)
            mount(None, f"{new}/proc/{p}", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
    for p in ("kcore", "keys", "timer_list", "sched_debug"):
        if os.path.exists(f"{new}/proc/{p}"):
            mount("/dev/null", f"{new}/proc/{p}", None, MS_BIND)
    mount("ceiling-dev", f"{new}/dev", "tmpfs", MS_NOSUID, "size=64k,mode=0755")
    for d in ("null", "zero", "full", "random", "urandom", "tty"):
        if os.path.exists("/dev/" + d):
            open(f"{new}/dev/{d}", "w").close()
            mount("/dev/" + d, f"{new}/dev/{d}", None, MS_BIND)
    for d, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                      ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{d}")
    os.mkdir(f"{new}/dev/shm", 0o1777)
    mount("ceiling-shm", f"{new}/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m")
    mount("ceiling-tmp", f"{new}/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=2g,mode=1777")
    mount("ceiling-run", f"{new}/run", "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    os.makedirs(f"{new}/.old", 0o700, exist_ok=True)
    _check(libc.syscall(PIVOT_ROOT, new.encode(), f"{new}/.old".encode()), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.old", MNT_DETACH), "umount /.old")
    os.rmdir("/.old")
    return new


def drop_privileges(*filters: bytes) -> None:
    """Shrink the bounding set to ``KEEP_CAPS`` (exec recomputes root's capabilities from
    it), set no_new_privs and install the seccomp filters (every process inherits them)."""
    last = 40
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        pass
    for cap in range(last + 1):
        if cap not in KEEP_CAPS:
            _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    for seccomp in filters:
        buf = ctypes.create_string_buffer(seccomp, len(seccomp))
        fprog = SockFprog(len(seccomp) // 8, ctypes.addressof(buf))
        _check(libc.prctl(22, 2, ctypes.byref(fprog), 0, 0), "seccomp")


def run_step(cfg: dict) -> int:
    """Exec the step (as root, capabilities dropped at exec) and return its exit code."""
    log = int(cfg["log"])
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.makedirs(cfg["cwd"], 0o755, exist_ok=True)
            os.chdir(cfg["cwd"])
            os.setsid()
            drop_privileges(bytes.fromhex(cfg["seccomp"]), bytes.fromhex(cfg["seccomp2"]))
            os.execve("/bin/sh", ["/bin/sh", "-c", cfg["run"]], cfg["env"])
        except BaseException as e:  # noqa: BLE001 - reported in the log
            os.write(2, f"ceiling-build: cannot start the step: {e}\n".encode())
        os._exit(126)
    signal.signal(signal.SIGALRM, lambda *_: os.kill(-1, signal.SIGKILL))
    signal.alarm(max(1, int(cfg["timeout"])))
    while True:
        try:
            got, status = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        if got == pid:
            break
    timed_out = signal.alarm(0) == 0 and status == signal.SIGKILL
    try:
        os.kill(-1, signal.SIGKILL)  # whatever the step left running
    except ProcessLookupError:
        pass
    if timed_out:
        os.write(log, f"\nceiling-build: timed out after {cfg['timeout']} s\n".encode())
        return 124
    return os.waitstatus_to_exitcode(status)


def network(cfg: dict) -> None:
    """In the build's own network namespace: bring up the loopback, listen on
    127.0.0.1:PROXY_PORT and hand the listening socket to the host's registry proxy (over
    ``cfg["proxy"]``, a unix socket the host passed): the host accepts and vets every
    connection; nothing in here holds a way out."""
    import fcntl
    import socket

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifr = struct.pack("16sH14s", b"lo", 0, b"")
    flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))  # IFF_UP
    s.close()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PROXY_PORT))
    listener.listen(64)
    chan = socket.socket(fileno=int(cfg["proxy"]))
    socket.send_fds(chan, [b"L"], [listener.fileno()])
    chan.close()
    listener.close()


def main() -> None:
    fd = int(sys.argv[1])
    cfg = json.loads(os.pread(fd, os.fstat(fd).st_size, 0))
    os.close(fd)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
                        | CLONE_NEWNET), "unshare")
    try:
        network(cfg)
    except OSError as e:
        os.write(int(cfg["log"]), f"ceiling-build: cannot set up the network: {e}\n".encode())
        sys.exit(125)
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    libc.sethostname(b"build", 5)
    try:
        build_root(cfg)
    except OSError as e:
        os.write(int(cfg["log"]), f"ceiling-build: cannot build the root: {e}\n".encode())
        os._exit(125)
    code = run_step(cfg)
    os.write(int(cfg["result"]), json.dumps({"code": code, "merge": cfg["merge"]}).encode())
    os._exit(0)


if __name__ == "__main__":
    main()
