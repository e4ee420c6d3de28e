"""Image-style base layers: a card's package steps, built once as root, shared by content id.

A card may ask for an *image*: an ordered list of steps, each a :class:`RunStep` (a shell
command run as root in the build sandbox, :mod:`._builder`) or a :class:`FilesStep` (files
placed at absolute paths, e.g. ``etc/app.conf``). Each step becomes one layer, like a
Dockerfile's, named by a content id over its parent's id, the step and (for steps that see
it) the workspace it starts from, and the host system it was built on
(:func:`host_base_id`: ``/etc/os-release`` and dpkg's status). Cards asking for the same
steps share the layers; a layer is built once per image store.

The store (:class:`ImageStore`) is ``$CEILING_IMAGE_DIR`` or ``$CEILING_HOME/images``, a
root-only (0700) folder: ``<id>/root/`` is the layer (an overlayfs upper folder: files,
whiteouts, opaque folders; owners kept, set-id bits cleared, devices, FIFOs and sockets
removed), ``<id>/work/`` the workspace after the step, ``<id>/meta.json`` what built it.
Run-time sandboxes show the layers read-only over the allow-listed root (``Limits.rootfs``,
see ``_holder.image_overlays``) and never have network.

What a build can reach (also in docs/import.md): the package registries and nothing else.
The build sandbox has its own network namespace (a loopback); its only way out is the host's
registry proxy (:mod:`._proxy`) behind ``127.0.0.1:3128``. Its root is an allow-list (system
folders, a copy of the host's world-readable ``/etc``, dpkg's and apt's state), never the
host's ``/``, home folders or the project; it runs as root with a reduced capability set,
``no_new_privs``, the sandbox's seccomp filter and one more that refuses ``socket(AF_UNIX)``
(:func:`no_unix_sockets`). Requires root.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import ConfigError, SandboxError, SandboxUnavailable
from .._tree import FileEntry, FileTree, read_tree, tree_hash, write_tree
from . import _runtime, _seccomp
from ._launch import namespaces_available
from ._layers import ceiling_home
from ._proxy import RegistryProxy

BUILDER = str(Path(__file__).with_name("_builder.py"))
VERSION = "1"
# What a layer never keeps: the build's scratch and the package managers' download caches.
EXCLUDE = ("tmp", "run", "proc", "sys", "dev", ".old", "root/.cache", "var/cache/apt/archives",
           "var/lib/apt/lists", "var/cache/debconf/templates.dat-old",
           "var/cache/debconf/config.dat-old", "var/log")
# Top-level names a files step may not place anything in.
RESERVED = frozenset({"proc", "sys", "dev", "run", "tmp", ".ceiling", "workspace"})
# /etc entries never copied into a build (also anything not world-readable).
ETC_DENY = frozenset({"shadow", "gshadow", "shadow-", "gshadow-", "sudoers", "sudoers.d",
                      "ssh", "machine-id", "credstore", "credstore.encrypted"})
BUILD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ImageBuildError(SandboxError):
    """A build step failed: its command, exit code and the tail of its output."""


@dataclass(frozen=True)
class RunStep:
    """A shell command run by ``/bin/sh -c`` as root in the build sandbox, in ``cwd``,
    with ``env`` on top of a plain environment (``DEBIAN_FRONTEND=noninteractive``,
    ``PIP_BREAK_SYSTEM_PACKAGES=1``...). ``workspace``: the step sees the workspace at the
    card's workdir (and its changes there become the card's initial files)."""

    run: str
    cwd: str = "/"
    env: tuple[tuple[str, str], ...] = ()
    workspace: bool = False
    timeout_s: float = 1800.0

    def key(self) -> dict[str, object]:
        return {"run": self.run, "cwd": self.cwd, "env": [list(x) for x in self.env],
                "workspace": self.workspace}


@dataclass(frozen=True)
class FilesStep:
    """Files at absolute paths outside the workspace (paths relative to ``/``)."""

    tree: Mapping[str, FileEntry] = field(default_factory=dict)

    def key(self) -> dict[str, object]:
        return {"files": tree_hash(self.tree)}


@dataclass(frozen=True)
class RuntimeStep:
    """The runtime's pytest and its dependencies (:mod:`._runtime`, pure Python, no download)
    copied into ``/usr/local/lib/python<python>/dist-packages``, so an image's python runs the
    in-process grader with exactly the runtime's pytest, offline."""

    python: str = "3"

    def key(self) -> dict[str, object]:
        return {"runtime": _runtime.current().key(), "python": self.python}


Step = RunStep | FilesStep | RuntimeStep


def python_version(python: str) -> str:
    """``X.Y`` of a host interpreter (the image's python is the host's unless a step
    replaced it), for :class:`RuntimeStep`."""
    out = subprocess.run([python, "-I", "-S", "-c",
                          "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, timeout=30, check=True)
    return out.stdout.strip()


@dataclass
class BuiltImage:
    """``layers``: the layers' root folders, lowest first (for ``Limits.rootfs``);
    ``workspace``: the initial workspace after every step; ``ids``; ``built``: how many
    layers this call built (the rest were in the store); ``seconds`` spent building."""

    layers: tuple[str, ...]
    workspace: FileTree
    ids: list[str]
    built: int = 0
    seconds: float = 0.0


def check_files_tree(tree: Mapping[str, FileEntry], *, workdir: str,
                     where: str = "files") -> None:
    """Refuse a files step that would place something where it must not: a relative path
    with ``..`` or an absolute one, a reserved top-level folder (``RESERVED``), the
    workspace's own folder (its files belong to the workspace), or a path under one of the
    tree's own symlinks (writing it would follow the link on the host)."""
    from .._tree import check_relpath

    links = {p for p, e in tree.items() if e.kind == "symlink"}
    wd = workdir.strip("/")
    for p in tree:
        rel = check_relpath(p, where=where)
        if rel.split("/", 1)[0] in RESERVED:
            raise ConfigError(f"{where}: /{rel} is in a folder the sandbox reserves",
                              where=where, fix=f"keep files out of {sorted(RESERVED)}")
        if rel == wd or rel.startswith(wd + "/"):
            raise ConfigError(f"{where}: /{rel} is in the workspace ({workdir})", where=where,
                              fix="put workspace files in the card's workspace/")
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in links:
                raise ConfigError(f"{where}: /{rel} lies under the symlink /"
                                  f"{'/'.join(parts[:i])}", where=where,
                                  fix="place the file at its real path, not through a link")


class ImageStore:
    """Built layers by content id, in a root-only folder (see the module doc)."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else image_root()
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(self.root, 0, 0)
        os.chmod(self.root, 0o700)

    def layer(self, lid: str) -> Path:
        return self.root / lid / "root"

    def has(self, lid: str) -> bool:
        return (self.root / lid / "meta.json").is_file() and self.layer(lid).is_dir()

    def workspace(self, lid: str) -> FileTree | None:
        p = self.root / lid / "work"
        return read_tree(p) if p.is_dir() else None


def image_root() -> Path:
    """The image store's folder: ``$CEILING_IMAGE_DIR``, else ``$CEILING_HOME/images``."""
    env = os.environ.get("CEILING_IMAGE_DIR")
    return Path(env) if env else ceiling_home() / "images"


def check_layer_dir(path: str) -> str:
    """A ``Limits.rootfs`` entry, checked before a holder mounts it: the real path of a
    built layer's ``root`` folder, in *the* image store (:func:`image_root`) that only root
    can enter (0700, owned by root), itself owned by root and writable by nobody else. Anything else (``/``, a home
    folder, a folder an agent could have written) is a :class:`ConfigError`."""
    real = os.path.realpath(path)
    layer, store = os.path.dirname(real), os.path.dirname(os.path.dirname(real))
    try:
        st_real, st_store = os.stat(real), os.stat(store)
    except OSError as e:
        raise ConfigError(f"image layer {path!r} does not exist ({e})", where="Limits.rootfs",
                          fix="build the image first (ceiling import ..., or build_image)") from None
    ok = (os.path.basename(real) == "root" and os.path.isfile(os.path.join(layer, "meta.json"))
          and store == os.path.realpath(image_root())
          and stat.S_ISDIR(st_real.st_mode) and st_real.st_uid == 0
          and not st_real.st_mode & 0o022 and st_store.st_uid == 0
          and not st_store.st_mode & 0o077 and real != "/")
    if not ok:
        raise ConfigError(f"{path!r} is not a built image layer (the root folder of a layer "
                          "in a root-only image store)", where="Limits.rootfs",
                          fix="pass BuiltImage.layers from build_image")
    return real


_BASE_ID: str | None = None


def host_base_id() -> str:
    """What every image is built on: this host's system (os-release, dpkg's status)."""
    global _BASE_ID
    if _BASE_ID is None:
        h = hashlib.sha256(f"ceiling-image-{VERSION}\0".encode())
        for p in ("/etc/os-release", "/var/lib/dpkg/status"):
            try:
                h.update(Path(p).read_bytes())
            except OSError:
                h.update(b"-")
        _BASE_ID = h.hexdigest()
    return _BASE_ID


def _layer_id(parent: str, step: Step, workspace: FileTree, workdir: str) -> str:
    key: dict[str, object] = {"parent": parent, "step": step.key()}
    if isinstance(step, RunStep) and step.workspace:
        key["workspace"] = [workdir, tree_hash(workspace)]
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def _rmtree(path: Path) -> None:
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if not os.path.islink(full):
                os.chmod(full, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def _build_etc(dst: Path) -> None:
    """A copy of the host's world-readable /etc (package-manager and TLS configuration),
    without ``ETC_DENY``; special files skipped, symlinks kept as links."""
    src = Path("/etc")
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        keep = []
        for d in dirnames:
            full = Path(dirpath) / d
            st = os.lstat(full)
            if str(rel / d) in ETC_DENY or d in ETC_DENY or d == "private":
                continue
            if stat.S_ISLNK(st.st_mode):
                (dst / rel / d).symlink_to(os.readlink(full))
            elif st.st_mode & 0o005 == 0o005:
                keep.append(d)
        dirnames[:] = keep
        for name in filenames:
            full = Path(dirpath) / name
            if name in ETC_DENY or str(rel / name) in ETC_DENY:
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                (dst / rel / name).symlink_to(os.readlink(full))
            elif stat.S_ISREG(st.st_mode) and st.st_mode & 0o004:
                try:
                    shutil.copy2(full, dst / rel / name, follow_symlinks=False)
                except OSError:
                    continue
    resolv = dst / "resolv.conf"  # often a link into /run, which the build does not show
    if resolv.is_symlink():
        resolv.unlink()
        try:
            resolv.write_bytes(Path("/etc/resolv.conf").read_bytes())
        except OSError:
            pass


def no_unix_sockets(arch: str | None = None) -> bytes:
    """A second seccomp filter for build steps: ``socket(AF_UNIX, ...)`` fails with EPERM
    (``socketpair`` stays allowed). Defence in depth: abstract unix sockets belong to a
    network namespace and have no permission check (the containerd-shim class of escapes);
    the build has a namespace of its own, and its root steps need no unix sockets."""
    import struct

    arch = arch or os.uname().machine
    nr = {"x86_64": 41, "aarch64": 198}[arch]
    audit = _seccomp.AUDIT_ARCH[arch]
    ld, jeq, ret = _seccomp.LD_ABS_W, _seccomp.JEQ, _seccomp.RET
    allow, eperm = _seccomp.RET_ALLOW, _seccomp.RET_ERRNO | _seccomp.EPERM
    prog = [(ld, 0, 0, _seccomp.OFF_ARCH), (jeq, 1, 0, audit), (ret, 0, 0, eperm),
            (ld, 0, 0, _seccomp.OFF_NR), (jeq, 0, 3, nr), (ld, 0, 0, _seccomp.OFF_ARG0),
            (jeq, 0, 1, 1), (ret, 0, 0, eperm), (ret, 0, 0, allow)]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


def _shared_etc(store: ImageStore) -> Path:
    """The build's /etc (:func:`_build_etc`), made once per host state and store and shared
    by every build (it is only ever a read-only lower: builds write their uppers)."""
    h = hashlib.sha256(host_base_id().encode())
    h.update(str(os.stat("/etc").st_mtime_ns).encode())
    for p in ("/etc/resolv.conf", "/etc/hosts"):
        try:
            h.update(Path(p).read_bytes())
        except OSError:
            pass
    dest = store.root / f".etc-{h.hexdigest()[:16]}"
    if not dest.is_dir():
        tmp = store.root / f".etc-tmp-{secrets.token_hex(4)}"
        try:
            _build_etc(tmp)
            os.chmod(tmp, 0o755)
            tmp.rename(dest)
        except OSError:  # another build made it first
            _rmtree(tmp)
    return dest


def _apply_diff(ws: FileTree, upper: Path) -> FileTree:
    """The workspace after a step: ``upper`` (the step's changes under the workdir, an
    overlayfs upper folder: whiteouts delete, opaque folders replace) applied to ``ws``.
    The build has exited: nothing changes ``upper`` while it is read; links are kept as
    links and never followed."""
    out = dict(ws)

    def drop(prefix: str) -> None:
        for k in [k for k in out if k == prefix or k.startswith(prefix + "/")]:
            del out[k]

    for dirpath, dirnames, filenames in os.walk(upper):
        rel_dir = Path(dirpath).relative_to(upper).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        if rel_dir:
            try:
                opaque = os.getxattr(dirpath, "trusted.overlay.opaque", follow_symlinks=False)
            except OSError:
                opaque = b""
            if opaque == b"y":
                drop(rel_dir)
            if rel_dir in out and out[rel_dir].kind != "dir":
                del out[rel_dir]
            if not any(k.startswith(rel_dir + "/") for k in out) and not filenames \
                    and not dirnames:
                out[rel_dir] = FileEntry.directory(stat.S_IMODE(os.lstat(dirpath).st_mode))
        for name in [*filenames, *dirnames]:
            full = os.path.join(dirpath, name)
            rel = f"{rel_dir}/{name}" if rel_dir else name
            st = os.lstat(full)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                drop(rel)
            elif stat.S_ISLNK(st.st_mode):
                drop(rel)
                out[rel] = FileEntry.symlink(os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                drop(rel)
                fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as f:
                    out[rel] = FileEntry(f.read(), stat.S_IMODE(st.st_mode) & 0o777)
            elif stat.S_ISDIR(st.st_mode) and rel in out and out[rel].kind != "dir":
                del out[rel]
    for k in [k for k, e in out.items() if e.kind == "dir"]:  # implied by a file now
        if any(x.startswith(k + "/") for x in out):
            del out[k]
    return out


def _sanitize(root: Path) -> None:
    """Make a finished build's upper folder a layer: drop ``EXCLUDE``, devices (whiteouts
    kept), FIFOs and sockets; clear set-id bits."""
    for rel in EXCLUDE:
        p = root / rel
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.is_dir():
            _rmtree(p)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*filenames, *dirnames]:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            mode = st.st_mode
            if stat.S_ISCHR(mode) and st.st_rdev == 0:
                continue
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) \
                    or stat.S_ISSOCK(mode):
                os.unlink(full)
            elif stat.S_ISREG(mode) and mode & 0o6000:
                os.chmod(full, stat.S_IMODE(mode) & ~0o6000)
    os.chmod(root, 0o755)


def _merge_into(src: Path, dst: Path) -> None:
    """Move ``src``'s entries into ``dst`` (folders merged, the rest replaced)."""
    if not src.exists():
        return
    if not dst.exists() or (dst.is_dir() and not dst.is_symlink() and not any(dst.iterdir())):
        if dst.exists():
            dst.rmdir()
        dst.parent.mkdir(parents=True, exist_ok=True)
        src.rename(dst)
        return
    for child in list(src.iterdir()):
        target = dst / child.name
        if child.is_dir() and not child.is_symlink() and target.is_dir() \
                and not target.is_symlink():
            _merge_into(child, target)
        else:
            if target.is_dir() and not target.is_symlink():
                _rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
            child.rename(target)


def _run_build(store: ImageStore, lowers: list[str], step: RunStep, ws: FileTree,
               workdir: str, tmp: Path) -> tuple[Path, FileTree]:
    """Run one step in the build sandbox; return its layer folder and the new workspace."""
    for d in ("mnt", "upper", "work", "skel", "ws"):
        (tmp / d).mkdir(mode=0o755)
    etc = _shared_etc(store)
    lows = list(lowers)
    if step.workspace:
        write_tree(ws, tmp / "ws" / workdir.strip("/"))
        lows.append(str(tmp / "ws"))
    env = {"PATH": BUILD_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb",
           "DEBIAN_FRONTEND": "noninteractive", "PIP_BREAK_SYSTEM_PACKAGES": "1",
           "PIP_ROOT_USER_ACTION": "ignore", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PIP_NO_CACHE_DIR": "1", "PYTHONDONTWRITEBYTECODE": "1", **dict(step.env)}
    proxy = "http://127.0.0.1:3128"
    env.update({"http_proxy": proxy, "https_proxy": proxy, "HTTP_PROXY": proxy,
                "HTTPS_PROXY": proxy, "no_proxy": "localhost,127.0.0.1",
                "NO_PROXY": "localhost,127.0.0.1", "npm_config_proxy": proxy,
                "npm_config_https_proxy": proxy})
    log = os.memfd_create("ceiling-build-log", os.MFD_CLOEXEC)
    res_r, res_w = os.pipe()
    chan, chan_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    chan.settimeout(60)
    cfg = {"mnt": str(tmp / "mnt"), "upper": str(tmp / "upper"), "work": str(tmp / "work"),
           "skel": str(tmp / "skel"), "etc": str(etc), "lowers": lows,
           "run": step.run, "cwd": step.cwd, "env": env, "timeout": step.timeout_s,
           "seccomp": _seccomp.program().hex(), "seccomp2": no_unix_sockets().hex(),
           "log": log, "result": res_w, "proxy": chan_child.fileno()}
    cfg_fd = os.memfd_create("ceiling-build-cfg", os.MFD_CLOEXEC)
    os.write(cfg_fd, json.dumps(cfg).encode())
    proxy_srv: RegistryProxy | None = None
    try:
        proc = subprocess.Popen([_runtime.base_python(), "-I", "-S", BUILDER, str(cfg_fd)],
                                pass_fds=(cfg_fd, log, res_w, chan_child.fileno()),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env={"PATH": BUILD_PATH})
        os.close(res_w)
        res_w = -1
        chan_child.close()
        try:  # the build's listening socket (127.0.0.1:3128 in its namespace)
            _, fds, _, _ = socket.recv_fds(chan, 16, 1)
        except OSError:
            fds = []
        if fds:
            proxy_srv = RegistryProxy(socket.socket(fileno=fds[0]))
        result = b""
        while chunk := os.read(res_r, 65536):
            result += chunk
        err = proc.communicate(timeout=step.timeout_s + 60)[1]
    finally:
        os.close(cfg_fd)
        os.close(res_r)
        if res_w >= 0:
            os.close(res_w)
        chan.close()
        chan_child.close()
        if proxy_srv is not None:
            proxy_srv.close()
    out = os.pread(log, 1 << 20, max(0, os.fstat(log).st_size - (1 << 20)))
    os.close(log)
    tail = out.decode(errors="replace")[-1500:]
    if not result:
        raise ImageBuildError(f"the build sandbox failed: "
                              f"{err.decode(errors='replace').strip()[-400:] or tail}",
                              fix="run as root on Linux with overlayfs")
    info = json.loads(result)
    if info["code"] != 0:
        raise ImageBuildError(f"build step exited {info['code']}: {step.run[:200]!r}\n{tail}",
                              fix="fix the step (it runs as root without a terminal in a "
                                  "Debian-like root; network: the package registries)")
    layer = tmp / "upper" / "root"
    for name, rel in info["merge"]:
        _merge_into(tmp / "upper" / name, layer / rel)
    wd = layer / workdir.strip("/")
    # only a step that sees the workspace changes it (its id hashes the workspace it saw);
    # what another step writes under the workdir is dropped
    new_ws = _apply_diff(ws, wd) if step.workspace and wd.is_dir() and not wd.is_symlink() \
        else dict(ws)
    if wd.is_dir() and not wd.is_symlink():
        _rmtree(wd)
    _sanitize(layer)
    return layer, new_ws


def build_image(steps: Sequence[Step], *, workdir: str, workspace: Mapping[str, FileEntry],
                store: ImageStore | None = None,
                progress: Callable[[str], None] | None = None) -> BuiltImage:
    """Build (or find) every layer of ``steps``; see the module doc. Raises
    :class:`ImageBuildError` naming the failing step, :class:`SandboxUnavailable` without
    root, :class:`ConfigError` for a files step that places something where it must not."""
    store = store or ImageStore()
    ws: FileTree = dict(workspace)
    parent = host_base_id()
    ids: list[str] = []
    layers: list[str] = []
    built, t0 = 0, time.perf_counter()
    for i, step in enumerate(steps):
        if isinstance(step, FilesStep):
            check_files_tree(step.tree, workdir=workdir, where=f"image step {i + 1} (files)")
        lid = _layer_id(parent, step, ws, workdir)
        if not store.has(lid):
            why = namespaces_available()
            if why:
                raise SandboxUnavailable(f"cannot build image layers: {why}",
                                         fix="run the import or build as root on Linux")
            if progress:
                what = step.run[:80] if isinstance(step, RunStep) else \
                    "the runtime's pytest" if isinstance(step, RuntimeStep) else "files"
                progress(f"building layer {i + 1}/{len(steps)}: {what}")
            tmp = store.root / f".build-{lid[:12]}-{secrets.token_hex(4)}"
            tmp.mkdir(mode=0o700)
            try:
                if isinstance(step, RunStep):
                    layer, new_ws = _run_build(store, layers, step, ws, workdir, tmp)
                elif isinstance(step, RuntimeStep):
                    layer, new_ws = tmp / "layer", ws
                    site = next(Path(_runtime.current().path).glob("lib/python3*/site-packages"))
                    shutil.copytree(site, layer / f"usr/local/lib/python{step.python}"
                                    / "dist-packages", symlinks=True)
                    _sanitize(layer)
                else:
                    layer = tmp / "layer"
                    write_tree(step.tree, layer)
                    _sanitize(layer)
                    new_ws = ws
                final = tmp / "final"
                final.mkdir()
                layer.rename(final / "root")
                if new_ws != ws:
                    write_tree(new_ws, final / "work")
                meta = {"id": lid, "parent": parent, "step": step.key(), "built_at": time.time()}
                (final / "meta.json").write_text(json.dumps(meta))
                os.chmod(final, 0o755)
                try:
                    final.rename(store.root / lid)
                except OSError:  # built concurrently by someone else: theirs stands
                    pass
                built += 1
            finally:
                _rmtree(tmp)
        saved = store.workspace(lid)
        ws = saved if saved is not None else ws
        ids.append(lid)
        layers.append(str(store.layer(lid)))
        parent = lid
    return BuiltImage(tuple(layers), ws, ids, built, time.perf_counter() - t0)


__all__ = ["BuiltImage", "FilesStep", "ImageBuildError", "ImageStore", "RunStep", "RuntimeStep",
           "Step", "build_image", "check_files_tree", "check_layer_dir", "host_base_id",
           "image_root", "no_unix_sockets", "python_version"]
