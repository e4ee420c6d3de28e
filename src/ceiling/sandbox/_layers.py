"""Content-addressed store of read-only layers.

A layer is a directory tree named by a SHA-256 content id; identical trees are stored once.
The store lives under ``$CEILING_HOME/layers`` (default ``~/.ceiling``). Two kinds:

- **tree layers** (:meth:`LayerStore.put_tree`, :meth:`LayerStore.put_dir`): a plain tree,
  named by :func:`~ceiling._tree.tree_hash` of its content.
- **diff layers** (:meth:`LayerStore.put_diff`): an overlayfs upper directory frozen by
  ``checkpoint()``. It may hold whiteouts (0/0 character devices) and opaque directories
  (``trusted.overlay.opaque``) and only makes sense on top of its ``parents``, which are
  recorded beside it in ``<id>.json``; its id hashes the parents and the content, so
  checkpoint cost depends on what changed, not on the workspace size.
- a **snapshot** (``put_dir(..., snapshot=True)``): a full tree that replaces everything
  below it when stacked (what the local backend's checkpoint writes).

:meth:`LayerStore.expand` turns a list of ids into the full stack, lowest first. Layers are
owned by the sandbox user (:data:`SANDBOX_UID`) when the store is written as root, so
commands in a ``namespace`` sandbox may modify the files they copy up. Never edit a stored
layer in place: its id would lie.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from .._errors import SandboxError, StateRejected
from .._home import ceiling_home
from .._tree import FileEntry, read_tree, tree_hash, write_tree

SANDBOX_UID = 61000  # the unprivileged user commands run as in a namespace sandbox
SANDBOX_GID = 61000
OPAQUE = "trusted.overlay.opaque"


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _opaque(path: str) -> bytes | None:
    try:
        return os.getxattr(path, OPAQUE, follow_symlinks=False)
    except OSError:
        return None


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    if os.geteuid() != 0:
        return
    os.lchown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, gid)


class LayerStore:
    """Read-only layers by content id. Safe for concurrent writers (atomic renames)."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else ceiling_home() / "layers"
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, layer_id: str) -> Path:
        p = self.root / layer_id
        if not layer_id or "/" in layer_id or not p.is_dir():
            raise SandboxError(f"no layer {layer_id!r} in {self.root}",
                               fix="store it first with LayerStore.put_tree or checkpoint()")
        return p

    def has(self, layer_id: str) -> bool:
        return bool(layer_id) and "/" not in layer_id and (self.root / layer_id).is_dir()

    def meta(self, layer_id: str) -> dict[str, object]:
        p = self.root / f"{layer_id}.json"
        return json.loads(p.read_text()) if p.is_file() else {}

    def _write_meta(self, lid: str, meta: dict[str, object]) -> None:
        # a unique temp name: threads may commit the same layer at once
        fd, tmp_meta = tempfile.mkstemp(prefix=f".{lid}.", suffix=".json", dir=self.root)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(meta))
        os.replace(tmp_meta, self.root / f"{lid}.json")

    def _commit(self, tmp: Path, lid: str, meta: dict[str, object] | None) -> str:
        if meta is not None:
            self._write_meta(lid, meta)
        try:
            tmp.rename(self.root / lid)
        except OSError:  # a concurrent writer stored the same content first
            shutil.rmtree(tmp, ignore_errors=True)
        return lid

    def put_tree(self, tree: Mapping[str, FileEntry]) -> str:
        """Store a tree (no-op if already stored) and return its layer id."""
        lid = tree_hash(tree)
        if not self.has(lid):
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
            write_tree(tree, tmp)
            os.chmod(tmp, 0o755)
            _chown_tree(tmp, SANDBOX_UID, SANDBOX_GID)
            self._commit(tmp, lid, None)
        return lid

    def put_dir(self, src: str | os.PathLike[str], *, snapshot: bool = False) -> str:
        """Store a host directory's current content as a layer. ``snapshot=True`` marks it
        as a full state that hides every layer below it when stacked."""
        lid = self.put_tree(read_tree(src, allow_outside_links=True))
        if snapshot:
            sid = hashlib.sha256(f"snapshot\0{lid}".encode()).hexdigest()
            if not self.has(sid):
                tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
                shutil.copytree(self.path(lid), tmp, symlinks=True, dirs_exist_ok=True)
                self._commit(tmp, sid, {"parents": [], "snapshot": True})
            return sid
        return lid

    def put_diff(self, upper: str | os.PathLike[str] | int, parents: Sequence[str], *,
                 private: bool = False, max_bytes: int | None = None) -> str:
        """Freeze an overlay upper directory on top of ``parents`` (lowest first).

        ``upper`` is a path or, better, an open directory fd; everything below it is reached
        only through directory fds opened with ``O_NOFOLLOW`` (see :func:`_walk`), so a
        symlink swapped in by a process still running in the sandbox is copied as a symlink
        and never followed, and no path the sandbox controls is ever resolved by the host.
        The caller should still stop those processes first (``NamespaceSandbox`` freezes
        its cgroup): this copy is then also consistent. Two passes: the first reads
        metadata only and raises :class:`~ceiling._errors.StateRejected`, before anything
        is written, when the tree holds a FIFO, socket or device (whiteouts excepted), is
        nested deeper than :data:`MAX_DEPTH`, or holds more than ``max_bytes`` of file data
        counted by apparent size (``st_size``: sparse files and hard links count in full,
        which is what the store would get). The second copies, reading at most the size the
        first saw; if the tree changed in between it raises ``StateRejected`` too. Owners
        are normalised to :data:`SANDBOX_UID` (root-owned entries stay root's), set-id bits
        dropped. Names need not be UTF-8.

        ``private=True`` (what ``fork()`` uses) gives the layer a unique id, never shared
        with an identical checkpoint, so it can be deleted when the last sandbox using it
        closes (:func:`release`); ``publish`` makes it permanent."""
        own = not isinstance(upper, int)
        top = os.open(upper, _DIR_FLAGS) if not isinstance(upper, int) else upper
        try:
            entries = _scan(top, max_bytes)
            h = hashlib.sha256(json.dumps(list(parents)).encode())
            if private:
                h.update(os.urandom(16))
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
            try:
                dst = os.open(tmp, _DIR_FLAGS)
                try:
                    _copy(top, dst, entries, h)
                    os.fchmod(dst, 0o755)
                    if os.geteuid() == 0:
                        os.fchown(dst, SANDBOX_UID, SANDBOX_GID)
                finally:
                    os.close(dst)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        finally:
            if own:
                os.close(top)
        lid = h.hexdigest()
        if self.has(lid):
            shutil.rmtree(tmp, ignore_errors=True)
            return lid
        meta: dict[str, object] = {"parents": list(parents)}
        if private:
            meta["private"] = True
            with _refs_lock:
                _private.add((str(self.root), lid))
        return self._commit(tmp, lid, meta)

    def publish(self, layer_id: str) -> None:
        """Make a private layer permanent (a public checkpoint was taken on top of it)."""
        with _refs_lock:
            if (str(self.root), layer_id) not in _private:
                return
            _private.discard((str(self.root), layer_id))
        m = self.meta(layer_id)
        m.pop("private", None)
        self._write_meta(layer_id, m)

    def remove_private(self, layer_id: str) -> None:
        """Delete a private layer made by this process (no-op for any other layer)."""
        with _refs_lock:
            mine = (str(self.root), layer_id) in _private
            _private.discard((str(self.root), layer_id))
        if mine:
            shutil.rmtree(self.root / layer_id, ignore_errors=True)
            (self.root / f"{layer_id}.json").unlink(missing_ok=True)

    def expand(self, ids: Iterable[str]) -> list[str]:
        """The full stack (lowest first) for ``ids``: each diff layer brings its parents,
        a snapshot hides what is below it, repeated ids are kept once (first place)."""
        out: list[str] = []
        for lid in ids:
            self.path(lid)
            m = self.meta(lid)
            chain = self.expand(m.get("parents", [])) + [lid]  # type: ignore[arg-type]
            if m.get("snapshot"):
                out = []
            for x in chain:
                if x not in out:
                    out.append(x)
        return out

    def materialize(self, ids: Sequence[str], dest: str | os.PathLike[str]) -> None:
        """Write the merged view of the stack ``ids`` (already expanded) into ``dest``,
        honouring whiteouts and opaque directories (used by the local backend)."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        for lid in ids:
            src = self.path(lid)
            for dirpath, dirnames, filenames in os.walk(src):
                rel_dir = Path(dirpath).relative_to(src)
                for name in sorted(dirnames) + sorted(filenames):
                    s, d = Path(dirpath) / name, dest / rel_dir / name
                    st = os.lstat(s)
                    if _is_whiteout(st) or (stat.S_ISDIR(st.st_mode) and _opaque(str(s))):
                        if d.is_dir() and not d.is_symlink():
                            shutil.rmtree(d)
                        elif d.exists() or d.is_symlink():
                            d.unlink()
                        if _is_whiteout(st):
                            continue
                    if stat.S_ISDIR(st.st_mode):
                        if d.is_symlink() or (d.exists() and not d.is_dir()):
                            d.unlink()
                        d.mkdir(exist_ok=True)
                        os.chmod(d, stat.S_IMODE(st.st_mode) | 0o200)
                    else:
                        if d.is_dir() and not d.is_symlink():
                            shutil.rmtree(d)
                        elif d.exists() or d.is_symlink():
                            d.unlink()
                        if stat.S_ISLNK(st.st_mode):
                            os.symlink(os.readlink(s), d)
                        elif stat.S_ISREG(st.st_mode):
                            shutil.copyfile(s, d)
                            os.chmod(d, stat.S_IMODE(st.st_mode))

    def ensure_owned(self, ids: Iterable[str]) -> None:
        """Give tree layers written by an older ceiling (owned by root) to the sandbox user,
        so commands can modify what they copy up. One ``stat`` per layer when all is well."""
        if os.geteuid() != 0:
            return
        for lid in ids:
            p = self.path(lid)
            if p.stat().st_uid != SANDBOX_UID and not self.meta(lid):
                _chown_tree(p, SANDBOX_UID, SANDBOX_GID)

    def empty(self) -> str:
        """The id of the empty layer (an overlay needs at least one lower layer)."""
        return self.put_tree({})


_refs: dict[tuple[str, str], int] = {}
_private: set[tuple[str, str]] = set()  # (store root, id) of private layers made here
_refs_lock = threading.Lock()


def hold(store: LayerStore, ids: Iterable[str]) -> None:
    """Count a use of every private layer of this process in ``ids`` (one per open stack).
    In memory only, so a reset pays nothing for it."""
    with _refs_lock:
        for lid in ids:
            key = (str(store.root), lid)
            if key in _private:
                _refs[key] = _refs.get(key, 0) + 1


def release(store: LayerStore, ids: Iterable[str]) -> None:
    """Drop a use; a private layer nobody in this process uses any more is deleted."""
    dead = []
    with _refs_lock:
        for lid in ids:
            key = (str(store.root), lid)
            if key in _refs:
                _refs[key] -= 1
                if _refs[key] <= 0:
                    del _refs[key]
                    dead.append(lid)
    for lid in dead:
        store.remove_private(lid)


# -- the freeze: fd-relative, no-follow walk and copy of an overlay upper directory ---------

MAX_DEPTH = 256  # folders nested deeper than this are refused (StateRejected "too_deep")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class _Entry(NamedTuple):
    depth: int  # 1 for a child of the top folder
    rel: str  # "/"-joined relative path; names as os returns them (surrogateescape)
    name: str
    st: os.stat_result


def _owner(i: int) -> int:
    """The stored owner: root stays root, every sandbox uid (a pool) becomes SANDBOX_UID."""
    return 0 if i == 0 else SANDBOX_UID


def _changed(rel: str) -> StateRejected:
    return StateRejected(f"{rel!r} changed while the sandbox state was being frozen",
                         reason="changed", path=rel,
                         fix="stop background processes that rewrite the workspace")


def _walk(top: int) -> Iterator[tuple[_Entry, int, int | None]]:
    """Pre-order walk below the open folder ``top``: (entry, parent fd, own fd if a folder).

    Every folder is opened relative to its parent's fd with ``O_NOFOLLOW|O_DIRECTORY`` and
    checked to be the inode ``lstat`` saw, so no symlink is ever followed and nothing is
    resolved by path. Children come in sorted order; fds live only while their subtree is
    walked (at most :data:`MAX_DEPTH` + 1 open)."""
    top_st = os.fstat(top)
    stack: list[tuple[int, str, Iterator[str], int]] = [(top, "", iter(sorted(os.listdir(top))), 1)]
    try:
        while stack:
            fd, prefix, names, depth = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                if fd != top:
                    os.close(fd)
                continue
            rel = prefix + name
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                raise _changed(rel) from None
            sub = None
            if stat.S_ISDIR(st.st_mode):
                if depth >= MAX_DEPTH:
                    raise StateRejected(f"folders are nested deeper than {MAX_DEPTH} levels "
                                        f"at {rel[:200]!r}...", reason="too_deep",
                                        path=rel[:200], fix="flatten the folder tree")
                if st.st_dev != top_st.st_dev:
                    raise StateRejected(f"{rel!r} is a mount point", reason="special_file",
                                        path=rel, fix="remove it from the workspace")
                try:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    raise _changed(rel) from None
                sst = os.fstat(sub)
                if (sst.st_ino, sst.st_dev) != (st.st_ino, st.st_dev):
                    os.close(sub)
                    raise _changed(rel)
            yield _Entry(depth, rel, name, st), fd, sub
            if sub is not None:
                stack.append((sub, rel + "/", iter(sorted(os.listdir(sub))), depth + 1))
    finally:
        for fd, *_ in stack:
            if fd != top:
                os.close(fd)


def _scan(top: int, max_bytes: int | None) -> list[_Entry]:
    """Pass 1 (metadata only): every entry, or StateRejected before anything is written."""
    entries, total = [], 0
    for e, _, _ in _walk(top):
        mode = e.st.st_mode
        if stat.S_ISREG(mode):
            total += e.st.st_size
            if max_bytes is not None and total > max_bytes:
                raise StateRejected(
                    f"the workspace holds more than {max_bytes >> 20} MB of file data "
                    f"(counted by apparent size; {e.rel!r} brought it to {total >> 20} MB)",
                    reason="too_big", path=e.rel,
                    fix="delete large or sparse files; the limit is limits.disk_mb")
        elif not (stat.S_ISDIR(mode) or stat.S_ISLNK(mode) or _is_whiteout(e.st)):
            kind = ("FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode)
                    else "device file" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "special file")
            raise StateRejected(f"{e.rel!r} is a {kind}: only regular files, folders and "
                                "symlinks can be frozen", reason="special_file", path=e.rel,
                                fix=f"remove the {kind} from the workspace")
        entries.append(e)
    return entries


def _copy_data(src: int, dst: int, size: int, h: Any) -> None:
    """Copy at most ``size`` bytes (what the scan counted), hashing them as they pass."""
    left = size
    while left > 0:
        buf = os.read(src, min(left, _CHUNK))
        if not buf:
            break
        h.update(buf)
        view = memoryview(buf)
        while view:
            view = view[os.write(dst, view):]
        left -= len(buf)


def _copy(top: int, dst_top: int, entries: list[_Entry], h: Any) -> None:
    """Pass 2: walk again, check each entry is the one scanned, copy it under ``dst_top``
    (all destination operations are fd-relative too) and hash it into ``h``."""
    root = os.geteuid() == 0
    dst_fds = [dst_top]
    it = iter(entries)
    try:
        for e, parent, sub in _walk(top):
            want = next(it, None)
            if want is None or (want.rel, want.st.st_ino, stat.S_IFMT(want.st.st_mode)) != \
                    (e.rel, e.st.st_ino, stat.S_IFMT(e.st.st_mode)):
                raise _changed(e.rel)
            st = want.st
            while len(dst_fds) > e.depth:  # leave the folders this entry is not inside
                os.close(dst_fds.pop())
            dparent = dst_fds[-1]
            uid, gid = _owner(st.st_uid), _owner(st.st_gid)
            mode = stat.S_IMODE(st.st_mode)
            fmt = stat.S_IFMT(st.st_mode)
            extra = b""
            if fmt == stat.S_IFDIR:
                assert sub is not None
                os.mkdir(e.name, 0o700, dir_fd=dparent)
                dfd = os.open(e.name, _DIR_FLAGS, dir_fd=dparent)
                dst_fds.append(dfd)
                try:
                    op = os.getxattr(sub, OPAQUE)
                except OSError:
                    op = None
                if op is not None:
                    os.setxattr(dfd, OPAQUE, op)
                    extra = op
                if root:
                    os.fchown(dfd, uid, gid)
                os.fchmod(dfd, mode)
            elif fmt == stat.S_IFREG:
                mode &= ~(stat.S_ISUID | stat.S_ISGID)
                try:
                    sfd = os.open(e.name, _FILE_FLAGS, dir_fd=parent)
                except OSError:
                    raise _changed(e.rel) from None
                try:
                    sst = os.fstat(sfd)
                    if (sst.st_ino, stat.S_IFMT(sst.st_mode)) != (st.st_ino, fmt):
                        raise _changed(e.rel)
                    dfd = os.open(e.name, _NEW_FILE, 0o600, dir_fd=dparent)
                    try:
                        fh = hashlib.sha256()
                        _copy_data(sfd, dfd, st.st_size, fh)
                        extra = fh.digest()
                        if root:
                            os.fchown(dfd, uid, gid)
                        os.fchmod(dfd, mode)
                    finally:
                        os.close(dfd)
                finally:
                    os.close(sfd)
            elif fmt == stat.S_IFLNK:
                try:
                    target = os.readlink(e.name, dir_fd=parent)
                except OSError:  # no longer a symlink
                    raise _changed(e.rel) from None
                os.symlink(target, e.name, dir_fd=dparent)
                if root:
                    os.chown(e.name, uid, gid, dir_fd=dparent, follow_symlinks=False)
                extra = os.fsencode(target)
                mode = 0o777
            else:  # a whiteout (the scan refused every other special file)
                os.mknod(e.name, stat.S_IFCHR | 0o000, os.makedev(0, 0), dir_fd=dparent)
                if root:
                    os.chown(e.name, uid, gid, dir_fd=dparent, follow_symlinks=False)
                mode = 0
            h.update(os.fsencode(e.rel) + f"\0{fmt:o}\0{mode:o}\0{uid}\0{gid}\0".encode())
            h.update(len(extra).to_bytes(8, "little") + extra)
        if next(it, None) is not None:
            raise _changed("(an entry disappeared)")
    finally:
        for fd in dst_fds[1:]:
            os.close(fd)
