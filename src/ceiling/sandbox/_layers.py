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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .._errors import SandboxError
from .._tree import FileEntry, read_tree, tree_hash, write_tree

SANDBOX_UID = 61000  # the unprivileged user commands run as in a namespace sandbox
SANDBOX_GID = 61000
OPAQUE = "trusted.overlay.opaque"


def ceiling_home() -> Path:
    return Path(os.environ.get("CEILING_HOME", Path.home() / ".ceiling"))


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

    def put_diff(self, upper: str | os.PathLike[str], parents: Sequence[str], *,
                 private: bool = False) -> str:
        """Freeze an overlay upper directory on top of ``parents`` (lowest first).

        ``private=True`` (what ``fork()`` uses) gives the layer a unique id, never shared
        with an identical checkpoint, so it can be deleted when the last sandbox using it
        closes (:func:`release`); ``publish`` makes it permanent."""
        upper = Path(upper)
        h = hashlib.sha256(json.dumps(list(parents)).encode())
        if private:
            h.update(os.urandom(16))
        entries: list[tuple[str, os.stat_result]] = []
        for dirpath, dirnames, filenames in os.walk(upper):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, upper)
                st = os.lstat(full)
                entries.append((rel, st))
                h.update(f"{rel}\0{st.st_mode:o}\0{st.st_uid}\0{st.st_gid}\0".encode())
                if stat.S_ISREG(st.st_mode):
                    with open(full, "rb") as f:
                        h.update(hashlib.file_digest(f, "sha256").digest())
                elif stat.S_ISLNK(st.st_mode):
                    h.update(os.readlink(full).encode())
                elif stat.S_ISDIR(st.st_mode):
                    h.update(_opaque(full) or b"")
        lid = h.hexdigest()
        if self.has(lid):
            return lid
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        try:
            for rel, st in entries:
                self._copy_entry(upper / rel, tmp / rel, st)
            os.chmod(tmp, 0o755)
            _chown_tree_root(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
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

    @staticmethod
    def _copy_entry(src: Path, dst: Path, st: os.stat_result) -> None:
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            dst.mkdir()
            op = _opaque(str(src))
            if op is not None:
                os.setxattr(dst, OPAQUE, op)
        elif stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
        elif _is_whiteout(st):
            os.mknod(dst, stat.S_IFCHR | 0o000, os.makedev(0, 0))
        elif stat.S_ISREG(st.st_mode):
            shutil.copyfile(src, dst, follow_symlinks=False)
        else:
            return  # sockets and FIFOs are not frozen into layers
        if os.geteuid() == 0:
            os.lchown(dst, st.st_uid, st.st_gid)
        if not stat.S_ISLNK(st.st_mode):
            os.chmod(dst, mode)

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


def _chown_tree_root(root: Path) -> None:
    if os.geteuid() == 0:
        os.lchown(root, SANDBOX_UID, SANDBOX_GID)
