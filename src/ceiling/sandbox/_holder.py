"""The holder of one ``namespace`` sandbox (run as a script by :mod:`._launch`, never imported).

``python -I -S _holder.py FD XFD CONFIG_HEX READY_R READY_W`` starts as host root, unshares
mount, PID, network, IPC and UTS namespaces and forks:

- the child is **PID 1** of the new PID namespace (``ceiling-init``, root). It builds the
  sandbox root (a small tmpfs with read-only binds of the host tree, a fresh ``/proc``, a
  minimal ``/dev``, the overlay at ``/workspace``, a private ``/tmp``), ``pivot_root``s into
  it and serves, on ``FD``: ``kill`` (SIGKILL a command's session), ``read``/``write`` (file
  I/O with the sandbox user's permissions, confined to ``/workspace`` and ``/tmp`` after
  resolving symlinks *inside* the sandbox) and ``reset`` (SIGKILL every process but itself,
  drop SysV IPC objects, unmount and remount the state tmpfs and the overlay, optionally over
  a new layer stack) and ``pause`` (SIGSTOP/SIGCONT every other process: the freeze's
  fallback where there is no cgroup freezer). It reaps orphans.
- the parent becomes **the spawner** (``ceiling-spawn``): it stays outside the new PID
  namespace (so neither ``reset`` nor the commands can reach it) while its children are
  created inside it; it drops to the sandbox user once, installs the seccomp filter
  (``cfg["seccomp"]``, built by ``_seccomp.py``; every command inherits it, so anything the
  spawner itself needs later, such as setns or unshare, must happen before) and serves
  ``exec`` on ``XFD`` with ``subprocess`` (vfork), replying with the pid, then with the wait
  status.

Messages are ``SOCK_SEQPACKET`` datagrams, one ``marshal``-ed dict each (json would cost its
import at start-up), file descriptors passed with ``SCM_RIGHTS``. Both processes exit when
their socket closes (the host died). PID 1 also notices the spawner's death (``PDEATHSIG``
= SIGTERM, re-armed after every credential change, and a pipe only the spawner holds open)
and then shuts down: kills every process of the namespace, thaws and removes the sandbox's
cgroups (through folder fds opened before ``pivot_root``) and exits; the kernel frees every
mount. This file imports only the standard library and is one file on purpose: it runs
under ``-I -S`` to start fast.

Identity and survival (issue 9): commands run as the sandbox's own pool uid (``cfg["uid"]``,
see ``_uidpool``); the layer store, owned by ``cfg["store_uid"]`` (61000), is mounted
*id-mapped* so it shows as that uid (``make_userns``/``prepare_store``), with a fall-back to
61000 where the kernel cannot. PID 1 and the spawner run at ``oom_score_adj`` -1000, every
command at 0; PID 1 stays out of the sandbox's cgroups (only the spawner and the commands
are in them), so the memory limit and the OOM killer only ever hit the agent's processes.
"""

import ctypes
import errno
import marshal
import os
import resource
import select
import signal
import socket
import stat
import struct
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
OPEN_TREE_CLONE, AT_RECURSIVE, AT_EMPTY_PATH = 1, 0x8000, 0x1000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
AT_FDCWD = -100
PR_SET_PDEATHSIG, PR_SET_NAME, PR_SET_NO_NEW_PRIVS = 1, 15, 38
SYS = {"x86_64": {"pivot_root": 155}, "aarch64": {"pivot_root": 41}}[os.uname().machine]
SYS.update(open_tree=428, move_mount=429, mount_setattr=442)
IPC_RMID = 0
CLONE_NEWUSER, MOUNT_ATTR_IDMAP, MOUNT_ATTR_NOEXEC = 0x10000000, 0x100000, 0x8
SYS.update(fsopen=430, fsconfig=431, fsmount=432)
FSCONFIG_CMD_CREATE = 6
PDEATH = signal.SIGTERM  # catchable: PID 1 cleans up (cgroups) before it exits

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                       ctypes.c_char_p]

STATE = "/.ceiling/state"
LAYERS = "/.ceiling/layers"
# The sandbox root is an allow-list (docs/sandbox.md, "Threat model"): these system folders,
# a synthesized /etc, the runtime and the base interpreter; nothing else of the host.
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC_COPY = ("nsswitch.conf", "ld.so.cache", "ld.so.conf", "localtime", "timezone", "os-release",
            "debian_version", "mime.types", "protocols", "services", "host.conf", "shells")
ETC_BIND = ("alternatives", "ld.so.conf.d")
RUNTIME = "/opt/ceiling/runtime"
WORKSPACE = "/workspace"
# Top-level names an image layer never overlays: the sandbox's own mounts.
IMAGE_SKIP = ("proc", "sys", "dev", "run", "tmp", ".ceiling", "workspace")


def _check(rc: int, what: str) -> int:
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
    return rc


def mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {dst}")


def umount(path: str) -> None:
    _check(libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")


def clone_tree(path: str, readonly: bool = True, recursive: bool = True) -> int:
    """A detached copy of the mount tree at ``path`` (read-only, nosuid) as an fd."""
    flags = OPEN_TREE_CLONE | (AT_RECURSIVE if recursive else 0)
    fd = _check(libc.syscall(SYS["open_tree"], AT_FDCWD, path.encode(), flags), f"open_tree {path}")
    attrs = MOUNT_ATTR_NOSUID | (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV if readonly else 0)
    buf = struct.pack("QQQQ", attrs, 0, 0, 0)
    _check(libc.syscall(SYS["mount_setattr"], fd, b"", AT_EMPTY_PATH | AT_RECURSIVE,
                        ctypes.c_char_p(buf), len(buf)), f"mount_setattr {path}")
    return fd


def attach(fd: int, dst: str) -> None:
    _check(libc.syscall(SYS["move_mount"], fd, b"", AT_FDCWD, dst.encode(),
                        MOVE_MOUNT_F_EMPTY_PATH), f"move_mount {dst}")
    os.close(fd)


def lo_up() -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    import fcntl

    ifr = struct.pack("16sH14s", b"lo", 0, b"")
    flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))  # SIOCSIFFLAGS, IFF_UP
    s.close()


def mount_state(cfg: dict) -> None:
    """A fresh state tmpfs (upper, work, tmp, shm), the overlay and the /tmp, /dev/shm binds."""
    uid, gid = cfg["uid"], cfg["gid"]
    mount("ceiling-state", STATE, "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={cfg['disk_mb']}m,nr_inodes={cfg['inodes']},mode=0700")
    for name, mode in (("upper", 0o755), ("work", 0o700), ("tmp", 0o1777), ("shm", 0o1777)):
        os.mkdir(f"{STATE}/{name}", mode)
        os.chmod(f"{STATE}/{name}", mode)
    os.chown(f"{STATE}/upper", uid, gid)
    lowers = ":".join(reversed(cfg["lowers"]))
    os.chdir(LAYERS)
    try:
        opts = (f"lowerdir={lowers},upperdir={STATE}/upper,workdir={STATE}/work,"
                "redirect_dir=off,metacopy=off,index=off")
        try:  # xino: a file copied up keeps its inode number, so `git clone` of a repository
            # in a lower layer (hard links, then an inode check) works (issue 15)
            mount("overlay", "/workspace", "overlay", MS_NOSUID | MS_NODEV, opts + ",xino=on")
        except OSError:
            mount("overlay", "/workspace", "overlay", MS_NOSUID | MS_NODEV, opts)
    finally:
        os.chdir("/")
    mount(f"{STATE}/tmp", "/tmp", None, MS_BIND)
    mount(f"{STATE}/shm", "/dev/shm", None, MS_BIND)
    if cfg.get("workdir", WORKSPACE) != WORKSPACE:  # the card's mount point: the same overlay
        mount(WORKSPACE, cfg["workdir"], None, MS_BIND)
    if cfg.get("home", "/tmp") != "/tmp":
        mount_home(cfg)


def mount_home(cfg: dict) -> None:
    """The home folder: a writable overlay (upper on the state tmpfs, so reset empties it)
    over the image's files at that path (dotfiles, a git identity), at ``cfg["home"]``."""
    for name in ("home", "home/upper", "home/work"):
        os.mkdir(f"{STATE}/{name}", 0o755)
    os.chown(f"{STATE}/home/upper", cfg["uid"], cfg["gid"])
    lowers = ":".join(cfg.get("home_lowers") or []) or "/.ceiling/empty"
    opts = (f"lowerdir={lowers},upperdir={STATE}/home/upper,workdir={STATE}/home/work,"
            "redirect_dir=off,metacopy=off,index=off")
    mount("overlay", cfg["home"], "overlay", MS_NOSUID | MS_NODEV, opts)


def unmount_state(cfg: dict | None = None) -> None:
    cfg = cfg or {}
    extra = [p for p, default in ((cfg.get("home"), "/tmp"), (cfg.get("workdir"), WORKSPACE))
             if p and p != default]
    for p in (*extra, "/dev/shm", "/tmp", "/workspace", STATE):
        umount(p)


def _etc(cfg: dict) -> dict[str, bytes]:
    """The synthesized /etc files: users and groups (root, nobody, the sandbox user), hosts,
    hostname, and copies of the world-readable system files programs read (``ETC_COPY``)."""
    uid, gid = cfg["uid"], cfg["gid"]
    out = {
        "passwd": (f"root:x:0:0:root:/root:/bin/sh\nsandbox:x:{uid}:{gid}:sandbox:"
                   f"{cfg.get('home', '/tmp')}:/bin/sh\n"
                   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n").encode(),
        "group": f"root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n".encode(),
        "hosts": b"127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost\n",
        "hostname": b"sandbox\n",
    }
    for name in ETC_COPY:
        p = "/etc/" + name
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o004 and st.st_size < (1 << 20):
            with open(p, "rb") as f:
                out[name] = f.read()
    return out


def image_overlays(new: str, cfg: dict, imgs: list[int],
                   later: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Show the card's image layers (``cfg["rootfs"]``, lowest first, attached read-only at
    ``/.ceiling/img/<i>``): each top-level folder they hold becomes a read-only overlay over
    the host's allow-listed folder of that name (system folders), over the synthesized /etc
    (whose own files win: users, hosts), or over a skeleton holding the mount points still
    to come (other folders). Returns ``later`` without the /etc binds the image replaced
    (those become overlays over the host folder instead). Never resolves a path the image
    controls on the host: every path is inside the new root or the attached layers."""
    dirs = [f"{new}/.ceiling/img/{i}" for i in range(len(imgs))]
    points = [p for p, _ in later] + [cfg.get("workdir", WORKSPACE), cfg.get("home", "/tmp")]
    tops: list[str] = []
    for d in dirs:
        for name in sorted(os.listdir(d)):
            if name not in IMAGE_SKIP and name not in tops and not os.path.islink(f"{d}/{name}") \
                    and os.path.isdir(f"{d}/{name}"):
                tops.append(name)
    opts = "redirect_dir=off,metacopy=off,index=off"
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV
    keep = list(later)
    for top in tops:
        target = f"{new}/{top}"
        if os.path.islink(target):  # /bin -> usr/bin: the image wrote through the link
            continue
        lowers = [f"{d}/{top}" for d in reversed(dirs)
                  if os.path.isdir(f"{d}/{top}") and not os.path.islink(f"{d}/{top}")]
        if top in SYSTEM and os.path.isdir(target):
            lowers.append(target)
        elif top == "etc":
            for name in ETC_BIND:
                sub = [f"{low}/{name}" for low in lowers if os.path.isdir(f"{low}/{name}")
                       and not os.path.islink(f"{low}/{name}")]
                if sub and os.path.isdir("/etc/" + name):
                    keep = [t for t in keep if t[0] != "/etc/" + name]
                os.makedirs(f"{target}/{name}", 0o755, exist_ok=True)
            lowers.insert(0, target)
        else:
            skel = f"{new}/.ceiling/skel/{top}"
            os.makedirs(skel, 0o755)
            for p in points:
                if p.startswith(f"/{top}/"):
                    os.makedirs(skel + p[len(top) + 1:], 0o755, exist_ok=True)
            lowers.insert(0, skel)
            os.makedirs(target, 0o755, exist_ok=True)
        mount("overlay", target, "overlay", flags, f"lowerdir={':'.join(lowers)},{opts}")
        if top == "etc":
            for name in ETC_BIND:
                sub = [f"{low}/{name}" for low in lowers[1:] if os.path.isdir(f"{low}/{name}")
                       and not os.path.islink(f"{low}/{name}")]
                if sub and os.path.isdir("/etc/" + name):
                    mount("overlay", f"{target}/{name}", "overlay", flags,
                          f"lowerdir={':'.join([*sub, '/etc/' + name])},{opts}")
    home = cfg.get("home", "/tmp")
    if home != "/tmp":  # the home overlay (mount_home) stacks the image's files at that path
        cfg["home_lowers"] = [f"/.ceiling/img/{i}{home}" for i in reversed(range(len(dirs)))
                              if os.path.isdir(f"{dirs[i]}{home}")
                              and not os.path.islink(f"{dirs[i]}{home}")]
    return keep


def build_root(cfg: dict) -> None:
    """Make the sandbox's root file system and pivot into it.

    The root is an allow-list on a small tmpfs: the system folders (``SYSTEM``; symlinks on
    merged-usr systems are recreated), a synthesized /etc (``_etc``, plus read-only binds of
    ``ETC_BIND``), the runtime at ``RUNTIME``, the base interpreter's prefix at its own path,
    the folders of ``CEILING_SANDBOX_PATHS``, each cloned read-only, nosuid, nodev; the
    folders in ``cfg["masks"]`` (the base's site-packages, anything forbidden under a shown
    folder) are covered by an empty read-only tmpfs. No /sys (it would show the host's
    cgroup tree and hardware); a fresh /proc, a minimal /dev, an empty /run. Every tree is
    cloned before the root tmpfs hides the host's /tmp (the store or runtime may live there).
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    links: list[tuple[str, str]] = []  # (path inside, symlink target)
    trees: list[tuple[str, int]] = []  # (path inside, detached read-only clone)
    for name in SYSTEM:
        p = "/" + name
        if os.path.islink(p):
            links.append((p, os.readlink(p)))
        elif os.path.isdir(p):
            trees.append((p, clone_tree(p)))
    for name in ETC_COPY:
        if os.path.islink("/etc/" + name):
            links.append(("/etc/" + name, os.readlink("/etc/" + name)))
    for name in ETC_BIND:
        p = "/etc/" + name
        if os.path.isdir(p) and not os.path.islink(p):
            trees.append((p, clone_tree(p)))
    base = cfg["base_prefix"]
    if not any(base == "/" + n or base.startswith(f"/{n}/") for n in SYSTEM):
        trees.append((base, clone_tree(base)))
    for p in cfg["paths"]:
        trees.append((p, clone_tree(p)))
    trees.append((RUNTIME, clone_tree(cfg["runtime"])))
    etc = _etc(cfg)
    store = cfg.pop("store_fd", None) or clone_tree(cfg["store"])  # prepare_store: id-mapped
    imgs = [clone_tree(p) for p in cfg.get("rootfs") or []]  # before /tmp is covered
    devs = {d: clone_tree("/dev/" + d, readonly=False, recursive=False)
            for d in ("null", "zero", "full", "random", "urandom", "tty") if os.path.exists("/dev/" + d)}
    new = "/tmp"
    mount("ceiling-root", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=2m,nr_inodes=4096,mode=0755")
    for d in ("etc", "proc", "dev", "sys", "tmp", "run", "workspace", ".ceiling"):
        os.mkdir(f"{new}/{d}", 0o700 if d == ".ceiling" else 0o755)
    os.mkdir(f"{new}/.ceiling/empty", 0o755)
    for i, fd in enumerate(imgs):  # root-only folder: only the overlays show them
        os.makedirs(f"{new}/.ceiling/img/{i}", 0o700)
        attach(fd, f"{new}/.ceiling/img/{i}")
    os.chmod(f"{new}/tmp", 0o1777)
    for name, data in etc.items():
        with open(f"{new}/etc/{name}", "wb") as f:
            f.write(data)
        os.chmod(f"{new}/etc/{name}", 0o644)
    os.symlink("../proc/self/mounts", f"{new}/etc/mtab")
    for p, target in links:
        os.symlink(target, new + p)
    order = sorted(trees, key=lambda t: (t[0].count("/"), t[0]))
    first = [t for t in order if t[0].lstrip("/") in SYSTEM]
    later = [t for t in order if t[0].lstrip("/") not in SYSTEM]
    for p, fd in first:
        os.makedirs(new + p, 0o755, exist_ok=True)
        attach(fd, new + p)
    if imgs:
        later = image_overlays(new, cfg, imgs, later)
    for p in (cfg.get("workdir", WORKSPACE), cfg.get("home", "/tmp")):
        os.makedirs(new + p, 0o755, exist_ok=True)  # in the root tmpfs (or an image skeleton)
    for p, fd in later:
        os.makedirs(new + p, 0o755, exist_ok=True)  # exists already under /usr, say
        attach(fd, new + p)
    for p in cfg["masks"]:
        if os.path.isdir(new + p):
            mount("ceiling-mask", new + p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=4k,nr_inodes=8,mode=0755")
    mount("proc", f"{new}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount("ceiling-run", f"{new}/run", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    mount("ceiling-dev", f"{new}/dev", "tmpfs", MS_NOSUID, "size=64k,mode=0755")
    for d, fd in devs.items():
        open(f"{new}/dev/{d}", "w").close()
        attach(fd, f"{new}/dev/{d}")
    for d, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                      ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{d}")
    os.mkdir(f"{new}/dev/shm", 0o1777)
    for d in ("state", "layers", "old"):
        os.mkdir(f"{new}/.ceiling/{d}", 0o700)
    attach(store, f"{new}/.ceiling/layers")
    _check(libc.syscall(SYS["pivot_root"], new.encode(), f"{new}/.ceiling/old".encode()),
           "pivot_root")
    os.chdir("/")
    umount("/.ceiling/old")
    os.rmdir("/.ceiling/old")
    mount_state(cfg)
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def kill_all() -> None:
    """SIGKILL every process of the namespace but PID 1 and reap them all."""
    for _ in range(1000):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def drop_sysv_ipc() -> None:
    for kind, ctl in (("shm", libc.shmctl), ("msg", libc.msgctl), ("sem", libc.semctl)):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            ident = int(line.split()[1])
            if kind == "sem":
                ctl(ident, 0, IPC_RMID, None)
            else:
                ctl(ident, IPC_RMID, None)


def make_userns(inside: int, outside: int) -> int:
    """An fd on a new user namespace whose maps are ``0 0 1`` and ``inside outside 1`` (for
    an id-mapped mount: files owned by ``inside`` show as ``outside``). Must run before
    ``unshare(CLONE_NEWPID)`` (the helper child's pid must be a host pid). Raises OSError."""
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:  # holds the namespace until its maps are written and its fd is open
        try:
            os.close(r)
            os.close(w2)
            os.write(w, b"1" if libc.unshare(CLONE_NEWUSER) == 0 else b"0")
            os.read(r2, 1)
        finally:
            os._exit(0)
    os.close(w)
    os.close(r2)
    try:
        if os.read(r, 1) != b"1":
            raise OSError(errno.EPERM, "unshare(CLONE_NEWUSER) failed")
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(f"0 0 1\n{inside} {outside} 1\n")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(r)
        os.close(w2)
        os.waitpid(pid, 0)


def prepare_store(cfg: dict, userns: int) -> str | None:
    """Clone the layer store (read-only) into ``cfg["store_fd"]``, id-mapped through
    ``userns`` so its files (owned by ``cfg["store_uid"]``) show as the sandbox's uid and
    commands can modify what they copy up. Where that fails (``userns`` < 0, or a kernel or
    file system without id-mapped mounts) the sandbox falls back to the shared store uid:
    ``cfg["uid"]``/``cfg["gid"]`` are changed and the reason is returned (a warning)."""
    fd = clone_tree(cfg["store"])
    cfg["store_fd"] = fd
    why = cfg.pop("userns_error", None)
    if userns >= 0:
        buf = struct.pack("QQQQ", MOUNT_ATTR_IDMAP, 0, 0, userns)
        rc = libc.syscall(SYS["mount_setattr"], fd, b"", AT_EMPTY_PATH | AT_RECURSIVE,
                          ctypes.c_char_p(buf), len(buf))
        os.close(userns)
        if rc == 0:
            return None
        why = f"id-mapped mount of the layer store failed: {os.strerror(ctypes.get_errno())}"
    if cfg["uid"] == cfg["store_uid"]:
        return None
    cfg["uid"], cfg["gid"] = cfg["store_uid"], cfg["store_gid"]
    return f"{why or 'no user namespace'}; commands run as the shared uid {cfg['uid']}"


def open_mqueue() -> int:
    """A private, detached mount of this IPC namespace's POSIX message queue file system (an
    fd, never attached to a path the sandbox sees), so a reset can unlink every queue; -1
    where the kernel has no mqueue fs or no new mount API."""
    fs = libc.syscall(SYS["fsopen"], b"mqueue", 1)  # FSOPEN_CLOEXEC
    if fs < 0:
        return -1
    try:
        if libc.syscall(SYS["fsconfig"], fs, FSCONFIG_CMD_CREATE, None, None, 0) < 0:
            return -1
        mnt = libc.syscall(SYS["fsmount"], fs, 1,  # FSMOUNT_CLOEXEC
                           MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)
        if mnt < 0:
            return -1
        try:  # the mount fd is an O_PATH one: open its root for listdir/unlink
            return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=mnt)
        finally:
            os.close(mnt)
    finally:
        os.close(fs)


def drop_mqueues(mq: int) -> None:
    """Unlink every POSIX message queue (they would outlive ``reset()`` otherwise)."""
    if mq < 0:
        return
    for name in os.listdir(mq):
        try:
            os.unlink(name, dir_fd=mq)
        except FileNotFoundError:
            pass


CGROUPS: list[tuple[int, str]] = []  # (fd of the parent folder, group name), PID 1 only
_down = False


def open_cgroups(paths: list[str]) -> None:
    """Keep fds on the sandbox's cgroup parents (opened before ``pivot_root``): ``shutdown``
    removes the groups when the host is gone and cannot."""
    for p in paths:
        try:
            fd = os.open(os.path.dirname(p), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        CGROUPS.append((fd, os.path.basename(p)))


def _cg_write(fd: int, name: str, value: bytes) -> None:
    try:
        f = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return
    try:
        os.write(f, value)
    except OSError:
        pass
    finally:
        os.close(f)


def shutdown() -> None:
    """PID 1's last act when the host or the spawner is gone: thaw the sandbox's groups,
    kill everything (``cgroup.kill`` reaches the spawner too on cgroup v2; on v1 the spawner
    exits by itself when its socket closes), remove the groups (waits at most 5 s for them
    to empty) and exit. The host's ``Holder.stop`` does the same when it is alive."""
    global _down
    if _down:
        # the second trigger (the PDEATH signal landing while the socket's EOF already
        # started a shutdown, or the reverse): the first one is still removing the groups
        # and ends with os._exit; exiting here left the groups behind (a flaky test)
        return
    _down = True
    try:
        os.setresuid(-1, 0, -1)  # a SIGTERM may land inside file_op
        os.setresgid(-1, 0, -1)
    except OSError:
        pass
    for fd, name in CGROUPS:
        _cg_write(fd, f"{name}/freezer.state", b"THAWED")
        _cg_write(fd, f"{name}/cgroup.freeze", b"0")
        _cg_write(fd, f"{name}/cgroup.kill", b"1")
    kill_all()
    import time

    deadline = time.monotonic() + 5.0
    left = list(CGROUPS)
    while left and time.monotonic() < deadline:
        for fd, name in list(left):
            try:
                os.rmdir(name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError:
                continue
            left.remove((fd, name))
        if left:
            time.sleep(0.005)
    os._exit(0)


def pause_all(stop: bool) -> bool:
    """Freeze fallback (no cgroup freezer): SIGSTOP every process of the namespace but PID 1
    and wait (at most 2 s) until all are stopped, or SIGCONT them all. True when done."""
    import time

    try:
        os.kill(-1, signal.SIGSTOP if stop else signal.SIGCONT)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + 2.0
    while stop:
        busy = False
        for d in os.listdir("/proc"):
            if d.isdigit() and d != "1":
                try:
                    with open(f"/proc/{d}/stat", "rb") as f:
                        state = f.read().rsplit(b")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                busy |= state not in (b"T", b"t", b"Z", b"X")
        if not busy:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def install_seccomp(prog: bytes) -> None:
    """Install the classic-BPF filter built by ``_seccomp.program()`` on this process (after
    no_new_privs); every process it creates from now on inherits it."""

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = SockFprog(len(prog) // 8, ctypes.addressof(buf))
    _check(libc.prctl(22, 2, ctypes.byref(fprog), 0, 0), "prctl(PR_SET_SECCOMP)")


def kill_session(sid: int) -> None:
    """SIGKILL every process whose session is ``sid`` (a command's whole tree)."""
    for _ in range(100):
        found = False
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == 1:
                continue
            try:
                with open(f"/proc/{d}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != b"Z":
                found = True
                try:
                    os.kill(int(d), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if not found:
            return


ALLOWED: tuple[str, ...] = ("/workspace", "/tmp")  # plus the card's workdir and home (main)


def _inside(real: str) -> bool:
    return any(real == r or real.startswith(r + "/") for r in ALLOWED)


KINDS = {stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket", stat.S_IFCHR: "character device",
         stat.S_IFBLK: "block device", stat.S_IFLNK: "symbolic link"}


def _not_regular(mode: int) -> dict:
    kind = KINDS.get(stat.S_IFMT(mode), "special file")
    return {"errno": errno.EPERM, "msg": f"not a regular file ({kind})"}


def file_op(cfg: dict, req: dict, fds: list[int]) -> dict:
    """read/write as the sandbox user, refusing anything that resolves outside ALLOWED.

    Never blocks: every open is ``O_NONBLOCK | O_NOFOLLOW`` (a FIFO opens at once or fails
    with ENXIO, a file another process holds a lease on fails with EWOULDBLOCK instead of
    waiting for the lease break), and anything that is not a regular file or a directory
    (FIFO, socket, device) is refused with ``not a regular file (<kind>)`` before any data
    moves; a write truncates only after that check. A read is refused past ``read_cap``
    bytes of file size (a sparse file would otherwise pour zeros into the host's memory).
    The parent-death signal, cleared by the credential changes, is re-armed after each."""
    path = req["path"]
    if not _inside(os.path.normpath(path)):
        return {"errno": errno.EPERM, "msg": "outside /workspace and /tmp"}
    os.setresgid(-1, cfg["gid"], -1)
    os.setresuid(-1, cfg["uid"], -1)
    flags = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
    try:
        real = os.path.realpath(path)
        if not _inside(real):
            return {"errno": errno.EPERM, "msg": "resolves outside /workspace and /tmp"}
        try:
            st = os.lstat(real)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                return _not_regular(st.st_mode)
        except FileNotFoundError:
            if req["op"] == "read":
                raise
        if req["op"] == "read":
            fd = os.open(real, os.O_RDONLY | flags)
        else:
            os.makedirs(os.path.dirname(real), exist_ok=True)
            if not _inside(os.path.realpath(os.path.dirname(real))):
                return {"errno": errno.EPERM, "msg": "resolves outside /workspace and /tmp"}
            fd = os.open(real, os.O_WRONLY | os.O_CREAT | flags, 0o644)
        try:
            if not _inside(os.readlink(f"/proc/self/fd/{fd}")):
                return {"errno": errno.EPERM, "msg": "resolves outside /workspace and /tmp"}
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                return {"errno": errno.EISDIR, "msg": "is a directory"}
            if not stat.S_ISREG(st.st_mode):
                return _not_regular(st.st_mode)
            cap = cfg.get("read_cap", 1 << 30)
            if req["op"] == "read" and st.st_size > cap:
                return {"errno": errno.EFBIG, "msg": f"file too large to read ({st.st_size} "
                        f"bytes, limit {cap}); inspect it with a command"}
            if req["op"] == "write":
                os.ftruncate(fd, 0)
            src, dst = (fd, fds[0]) if req["op"] == "read" else (fds[0], fd)
            os.lseek(src, 0, 0)
            while True:
                n = os.sendfile(dst, src, None, 1 << 20)
                if n == 0:
                    break
            if req["op"] == "write" and req.get("mode") is not None:
                os.fchmod(fd, req["mode"])
        finally:
            os.close(fd)
        return {"errno": 0}
    except OSError as e:
        if e.errno == errno.ENXIO:  # a FIFO without reader or a socket, swapped in meanwhile
            return {"errno": errno.EPERM, "msg": "not a regular file (fifo or socket)"}
        if e.errno == errno.EWOULDBLOCK:
            return {"errno": errno.EBUSY, "msg": "another process holds a lease on the file"}
        if e.errno == errno.ELOOP:
            return {"errno": errno.EPERM, "msg": "is a symbolic link (not followed)"}
        return {"errno": e.errno or errno.EIO, "msg": e.strerror or str(e)}
    finally:
        os.setresuid(-1, 0, -1)
        os.setresgid(-1, 0, -1)
        libc.prctl(PR_SET_PDEATHSIG, PDEATH, 0, 0, 0)


def _loop(sock: socket.socket, on_msg, on_child, on_eof=None, watch: int = -1,
          on_watch=None) -> None:
    """Serve ``sock`` until it closes (then ``on_eof``, default exit); ``on_child`` runs when
    SIGCHLD arrived; data on ``watch`` (a pipe's read end) goes to ``on_watch``, its hang-up
    also calls ``on_eof``."""
    rfd, wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(rfd, select.POLLIN)
    if watch >= 0:
        poller.register(watch, select.POLLIN)
    on_child()
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        for fd, _ in events:
            if fd == rfd:
                try:
                    while os.read(rfd, 512):
                        pass
                except BlockingIOError:
                    pass
                on_child()
                continue
            if fd == watch:
                data = os.read(watch, 512)
                if data:
                    on_watch(data)
                    continue
                msg = b""
            else:
                try:
                    msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
                except InterruptedError:
                    continue
            if not msg:
                (on_eof or (lambda: os._exit(0)))()
                os._exit(0)
            try:
                on_msg(marshal.loads(msg), fds)
            finally:
                for f in fds:
                    os.close(f)


def serve_init(sock: socket.socket, cfg: dict, life: int = -1, mq: int = -1,
               spawner_adj: int = -1) -> None:
    """PID 1: reaps orphans, kills sessions, does file I/O and resets. ``life`` is a pipe
    only the spawner holds open: its hang-up (the spawner died) shuts the sandbox down, as
    does the host's socket closing; a byte on it asks PID 1 to put the spawner back to
    oom_score_adj -1000 (``spawner_adj``: its ``oom_adj`` file, see ``serve_spawner``); ``mq``
    is the private mqueue mount (``open_mqueue``)."""

    def on_watch(data: bytes) -> None:
        if spawner_adj >= 0:
            try:
                os.write(spawner_adj, b"-17")
            except OSError:
                pass


    def send(obj: dict) -> None:
        sock.send(marshal.dumps(obj))

    def on_child() -> None:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass

    def on_msg(req: dict, fds: list[int]) -> None:
        op = req["op"]
        if op == "kill":
            kill_session(req["pid"])
            send({"id": req["id"], "ok": True})
        elif op in ("read", "write"):
            send({"id": req["id"], **file_op(cfg, req, fds)})
        elif op == "pause":  # freeze fallback when there is no cgroup freezer
            send({"id": req["id"], "ok": pause_all(bool(req["stop"]))})
        elif op == "reset":
            kill_all()
            drop_sysv_ipc()
            try:
                drop_mqueues(mq)
                unmount_state(cfg)
                if req.get("lowers") is not None:
                    cfg["lowers"] = req["lowers"]
                mount_state(cfg)
                send({"id": req["id"], "ok": True})
            except OSError as e:
                send({"id": req["id"], "ok": False, "msg": str(e)})

    _loop(sock, on_msg, on_child, on_eof=shutdown, watch=life, on_watch=on_watch)


def own_memcg(memcg: str, procfd: int) -> str:
    """This process's memory cgroup folder (cgroup v1 when ``memcg``, the sandbox's, lies
    under the v1 memory hierarchy, else v2), read from the host's /proc."""
    v1 = memcg.startswith("/sys/fs/cgroup/memory/")
    fd = os.open("self/cgroup", os.O_RDONLY | os.O_CLOEXEC, dir_fd=procfd)
    try:
        lines = os.read(fd, 65536).decode().splitlines()
    finally:
        os.close(fd)
    for line in lines:
        _, ctl, path = line.split(":", 2)
        if (v1 and "memory" in ctl.split(",")) or (not v1 and line.startswith("0::")):
            return ("/sys/fs/cgroup/memory" if v1 else "/sys/fs/cgroup") + path.rstrip("/")
    raise OSError(errno.ENOENT, "no memory cgroup in /proc/self/cgroup")


def memcg_fds(cfg: dict, procfd: int) -> tuple[int, int]:
    """``(enter, leave)``: ``cgroup.procs`` of the sandbox's memory-limited group and of the
    group this process is in now (the host's), opened as root before ``pivot_root``. Writing
    "0" to one moves the writer there; the kernel checks the *opener's* credentials (Linux
    5.16+, the CVE-2021-4197 fix), so the spawner can move itself after dropping root while
    commands, which cannot open these files, cannot. ``(-1, -1)`` when unavailable."""
    memcg = cfg.get("memcg")
    if not memcg:
        return -1, -1
    enter = leave = -1
    try:
        enter = os.open(memcg + "/cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        leave = os.open(own_memcg(memcg, procfd) + "/cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        return enter, leave
    except (OSError, ValueError):
        for fd in (enter, leave):
            if fd >= 0:
                os.close(fd)
        return -1, -1


SPAWN_HEADROOM = 32 << 20  # free memory a spawn needs, at most a quarter of the limit


def memcg_limit(cfg: dict) -> tuple[int, int]:
    """``(limit in bytes, fd on memory.stat)`` of the sandbox's memory cgroup, or (0, -1)."""
    memcg = cfg.get("memcg")
    if not memcg:
        return 0, -1
    for name in ("memory.max", "memory.limit_in_bytes"):
        try:
            with open(f"{memcg}/{name}") as f:
                limit = int(f.read().strip())
            return limit, os.open(f"{memcg}/memory.stat", os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, ValueError):
            continue
    return 0, -1


def serve_spawner(sock: socket.socket, cfg: dict, init_pid: int, procfd: int = -1,
                  life: int = -1, mem: tuple[int, int] = (-1, -1),
                  memstat: tuple[int, int] = (0, -1)) -> None:
    """The spawner: outside the sandbox's PID namespace (so ``kill(-1)`` at reset and the
    commands cannot reach it) but creating its children inside it, in the sandbox's mount,
    network, IPC and UTS namespaces, as the unprivileged sandbox user. Dropping privileges
    once here lets ``subprocess`` use vfork: a fork of this Python process costs ~4-8 ms on
    the project's VMs, a vfork+exec ~1 ms.

    OOM: commands must be in the sandbox's memory cgroup from their first instruction, so
    the spawner moves *itself* into it for each ``Popen`` and back out to the host's group
    right after (``mem``, see ``memcg_fds``; 50 µs a pair): between spawns the OOM killer of
    the sandbox's cgroup cannot pick it whatever the scores. If moving out ever fails it
    stays in (limits still hold); if moving in fails it refuses to spawn (fail closed).
    During a spawn it must not be the OOM killer's choice either, while every command is:
    and since an agent can keep its cgroup at the limit on purpose (tmpfs pages plus many
    small processes at the lowest score) so that the spawn itself triggers the OOM, the
    spawner refuses to spawn (exit 126, a clear message) while less than
    ``SPAWN_HEADROOM`` (at most a quarter) of the limit is free of anonymous and tmpfs
    memory.
    Commands inherit the spawner's ``oom_score_adj`` at fork, so the spawner sets *its own*
    score to the commands' value around each ``Popen`` (race-free: no command ever runs at
    the spawner's score) and back after. Where the holder may lower scores (CAP_SYS_RESOURCE,
    ``cfg["cmd_adj"]`` 0): the spawner runs at -1000 with ``oom_score_adj_min`` 0 (a
    privileged write of 0 sets that floor, the legacy ``oom_adj`` -17 sets -1000 without
    moving it), raises itself to 0 for the ``Popen`` and PID 1, root, puts it back to -1000
    when asked through the ``life`` pipe (a byte); commands start at 0 and can never go
    below 0. Without CAP_SYS_RESOURCE (containers that drop it, ``cmd_adj`` 1000): the
    spawner stays at 0 (raising itself to 1000 while inside the memory cgroup would make it
    the first victim of an OOM during the spawn) and raises each command to 1000 right
    after it started; what the command forked before that stays at 0, the floor every
    command may lower itself to anyway. Residual: during a spawn (inside the memory
    cgroup, about a millisecond) an OOM can pick the spawner if it is the largest process
    at score 0 (docs/sandbox.md)."""
    import subprocess

    def _self_adj(name: str) -> int:
        try:
            return os.open(f"self/{name}", os.O_WRONLY | os.O_CLOEXEC, dir_fd=procfd)
        except OSError:
            return -1

    score = _self_adj("oom_score_adj")  # opened as root: writable after the uid drop too
    protected = not cfg["cmd_adj"]
    if protected:
        legacy = _self_adj("oom_adj")
        for fd, value in ((score, b"0"), (legacy, b"-17")):
            try:
                os.write(fd, value)
            except OSError:
                protected = False
        os.close(legacy)
    up = str(cfg["cmd_adj"]).encode()

    def adj(value: bytes) -> None:
        try:
            os.write(score, value)
        except OSError:
            pass

    for name, value in cfg["rlimits"].items():
        if name != "RLIMIT_CPU":
            resource.setrlimit(getattr(resource, name), (value, value))
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.setgroups([])
    os.setresgid(cfg["gid"], cfg["gid"], cfg["gid"])
    os.setresuid(cfg["uid"], cfg["uid"], cfg["uid"])
    if cfg.get("seccomp"):  # after no_new_privs and the uid drop: every command inherits it
        install_seccomp(cfg["seccomp"])
    os.umask(0o022)
    cpu = cfg["rlimits"].get("RLIMIT_CPU")
    running: dict[int, tuple[str, subprocess.Popen]] = {}

    def send(obj: dict) -> None:
        sock.send(marshal.dumps(obj))

    def on_child() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == init_pid:
                os._exit(1)
            entry = running.pop(pid, None)
            if entry is not None:
                rid, proc = entry
                proc.returncode = status
                send({"id": rid, "status": status})

    def on_msg(req: dict, fds: list[int]) -> None:
        rid = req["id"]
        if "big" in req:  # argv/env too large for one datagram: they came in a memfd
            size = os.fstat(fds[3]).st_size
            req.update(marshal.loads(os.pread(fds[3], size, 0)))
        free = headroom()
        if free is not None and free < min(SPAWN_HEADROOM, limit // 4):
            os.write(fds[2], f"sandbox: the sandbox's memory is full ({free >> 20} MB free of "
                     f"{limit >> 20} MB, tmpfs included): a command cannot start; free some "
                     "(kill a process, delete files in /dev/shm or /tmp) or reset\n".encode())
            send({"id": rid, "status": 126 << 8})
            return
        if outside[0]:
            try:
                os.write(moves[0], b"0")  # into the memory-limited group: the child starts there
                outside[0] = False
            except OSError as e:
                os.write(fds[2], f"sandbox: cannot enter the memory cgroup: {e}\n".encode())
                send({"id": rid, "status": 126 << 8})
                return
        if protected:
            adj(up)  # the command inherits this score (see the docstring)
        try:
            proc = subprocess.Popen(req["argv"], stdin=fds[0], stdout=fds[1], stderr=fds[2],
                                    cwd=req["cwd"], env=req["env"], close_fds=True,
                                    start_new_session=True, restore_signals=True)
        except OSError as e:
            where = "cannot enter " + req["cwd"] if e.filename == req["cwd"] else req["argv"][0]
            code = 127 if isinstance(e, FileNotFoundError) and where == req["argv"][0] else 126
            os.write(fds[2], f"sandbox: {where}: {e.strerror}\n".encode())
            send({"id": rid, "status": code << 8})
            return
        finally:
            if protected:
                try:
                    os.write(life, b"r")  # PID 1 (root) puts the spawner back to -1000
                except BlockingIOError:
                    pass  # PID 1 has 64 KiB of requests unread: it will get to them
            if moves[1] >= 0:
                try:
                    os.write(moves[1], b"0")  # back out: the OOM killer cannot choose it there
                    outside[0] = True
                except OSError:
                    moves[1] = -1  # stay inside from now on (the limits still hold)
        if cpu:
            try:
                resource.prlimit(proc.pid, resource.RLIMIT_CPU, (cpu, cpu))
            except OSError:
                pass
        if not protected:  # best effort: a process it forked first keeps 0 (the floor)
            try:
                fd = os.open(f"{proc.pid}/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC,
                             dir_fd=procfd)
                try:
                    os.write(fd, up)
                finally:
                    os.close(fd)
            except OSError:
                pass
        running[proc.pid] = (rid, proc)
        send({"id": rid, "pid": proc.pid})

    outside = [False]  # the host puts the spawner in every group at start
    moves = list(mem)
    limit, stat_fd = memstat

    def headroom() -> int | None:
        """The memory limit minus what no reclaim can free (anonymous memory and tmpfs)."""
        if stat_fd < 0:
            return None
        try:
            vals = dict(line.split(" ", 1) for line in
                        os.pread(stat_fd, 16384, 0).decode().splitlines())
            used = sum(int(vals.get(k, vals.get(k2, "0"))) for k, k2 in
                       (("total_rss", "anon"), ("total_shmem", "shmem")))
        except (OSError, ValueError):
            return None
        return limit - used

    _loop(sock, on_msg, on_child)


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    xsock = socket.socket(fileno=int(sys.argv[2]))
    cfg_fd = int(sys.argv[3])  # a memfd: PID 1's argv is readable by the commands
    cfg = marshal.loads(os.pread(cfg_fd, os.fstat(cfg_fd).st_size, 0))
    os.close(cfg_fd)
    global ALLOWED
    ALLOWED = tuple(dict.fromkeys(("/workspace", "/tmp", cfg.get("workdir", WORKSPACE),
                                   cfg.get("home", "/tmp"))))
    if sys.argv[0].startswith("/proc/self/fd/"):  # the script, opened by the host
        os.close(int(sys.argv[0].rsplit("/", 1)[1]))
    os.chdir("/")  # pivot_root moves cwds at the old root; others would pin the old tree
    try:  # PID 1 and the spawner: never the OOM killer's choice (see serve_spawner)
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("-1000")
        with open("/proc/self/oom_score_adj") as f:  # some kernels accept and ignore it
            if f.read().strip() != "-1000":
                raise OSError("oom_score_adj -1000 did not take")
        cfg["cmd_adj"] = 0
    except OSError:  # no CAP_SYS_RESOURCE (some containers): commands go first instead
        cfg["cmd_adj"] = 1000
    userns = -1
    if cfg.get("store_uid") is not None and cfg["uid"] != cfg["store_uid"] \
            and "userns_error" not in cfg:
        try:  # before the PID namespace: the helper child's pid must be a host pid
            userns = make_userns(cfg["store_uid"], cfg["uid"])
        except OSError as e:
            cfg["userns_error"] = f"cannot make the store's id-mapping user namespace: {e}"
    netns = cfg.get("netns_fd")  # network_of: join that sandbox's network namespace
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
                        | (CLONE_NEWNET if netns is None else 0)), "unshare")
    if netns is not None:
        _check(libc.setns(netns, CLONE_NEWNET), "setns net")
        os.close(netns)
    life_r, life_w = os.pipe()  # only the spawner holds life_w: PID 1 sees it die
    spawner = os.getpid()  # this process becomes the spawner after the fork
    procfd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the host's
    mem = memcg_fds(cfg, procfd)  # (before the host adds this process to the sandbox's)
    memstat = memcg_limit(cfg)
    pid = os.fork()
    if pid:
        sock.close()
        os.close(int(sys.argv[5]))
        os.close(life_r)
        os.set_blocking(life_w, False)  # a full pipe must never stop a spawn
        if userns >= 0:
            os.close(userns)
        libc.prctl(PR_SET_NAME, b"ceiling-spawn", 0, 0, 0)
        ready = os.read(int(sys.argv[4]), 16)  # init has pivoted: the uid to run commands as
        if not ready.isdigit():
            os._exit(1)
        os.close(int(sys.argv[4]))
        cfg["uid"] = cfg["gid"] = int(ready)
        serve_spawner(xsock, cfg, pid, procfd, life_w, mem, memstat)
        os._exit(0)
    xsock.close()
    os.close(int(sys.argv[4]))
    os.close(life_w)
    os.close(procfd)
    for fd in (*mem, memstat[1]):
        if fd >= 0:
            os.close(fd)
    spawner_adj = -1  # PID 1 puts the spawner back to -1000 after each spawn (serve_spawner)
    if not cfg["cmd_adj"]:
        try:
            spawner_adj = os.open(f"/proc/{spawner}/oom_adj", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            pass
    signal.signal(PDEATH, lambda *_: shutdown())
    libc.prctl(PR_SET_PDEATHSIG, PDEATH, 0, 0, 0)
    libc.prctl(PR_SET_NAME, b"ceiling-init", 0, 0, 0)
    os.setgroups([])
    open_cgroups(cfg.get("cgroups", []))
    warn = mq = None
    try:
        host_pid = int(os.readlink("/proc/self"))  # the host's /proc still shows host pids
        warn = prepare_store(cfg, userns)
        mq = open_mqueue()
        libc.sethostname(b"sandbox", 7)
        if netns is None:
            lo_up()
        build_root(cfg)
    except BaseException as e:  # noqa: BLE001 - reported to the host, then exit
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        line = f" (holder line {tb.tb_lineno})" if tb is not None else ""
        sock.send(marshal.dumps({"ready": False, "msg": f"{type(e).__name__}: {e}{line}"}))
        os._exit(1)
    os.write(int(sys.argv[5]), str(cfg["uid"]).encode())
    os.close(int(sys.argv[5]))
    sock.send(marshal.dumps({"ready": True, "host_pid": host_pid, "uid": cfg["uid"],
                             "warn": warn, "cmd_adj": cfg["cmd_adj"]}))
    serve_init(sock, cfg, life_r, mq, spawner_adj)


if __name__ == "__main__":
    main()
