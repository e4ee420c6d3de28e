"""File trees: the in-memory form of a workspace, a test folder or a sandbox layer.

A floor module: both :mod:`ceiling.cards` (which re-exports every name here) and
:mod:`ceiling.sandbox` build on it, so the sandbox knows nothing of cards.

A :data:`FileTree` maps a POSIX relative path (``"src/app.py"``) to a :class:`FileEntry`.
Directories are implied by their files; an explicit ``dir`` entry keeps an empty one.
Trees hash to a stable content id (paths, kinds, modes and bytes; never mtimes or owners),
which names a layer in the content-addressed store.

Paths are ``str``; a name that is not valid UTF-8 is carried the way ``os`` returns it
(``surrogateescape``), hashed and written back as its original bytes, so any file name a
workspace may hold round-trips.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from ._errors import CardError

Kind = Literal["file", "dir", "symlink"]


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One path in a tree: a regular file (``data``, ``mode``), a directory or a symlink."""

    data: bytes = b""
    mode: int = 0o644
    kind: Kind = "file"
    target: str | None = None  # symlink target, only for kind == "symlink"

    @classmethod
    def text(cls, text: str, mode: int = 0o644) -> FileEntry:
        return cls(text.encode(), mode)

    @classmethod
    def directory(cls, mode: int = 0o755) -> FileEntry:
        return cls(b"", mode, "dir")

    @classmethod
    def symlink(cls, target: str) -> FileEntry:
        return cls(b"", 0o777, "symlink", target)


FileTree = dict[str, FileEntry]


def check_relpath(path: str, *, where: str = "path") -> str:
    """Normalise a relative POSIX path; refuse absolute paths and ``..`` escapes."""
    p = PurePosixPath(path)
    if p.is_absolute() or not str(p) or str(p) == ".":
        raise CardError(f"{path!r} is not a relative path", where=where,
                        fix="use a path relative to the folder, like 'src/app.py'")
    if ".." in p.parts:
        raise CardError(f"{path!r} escapes its folder with '..'", where=where,
                        fix="keep every path inside the folder")
    return str(p)


def tree_hash(tree: Mapping[str, FileEntry]) -> str:
    """SHA-256 over sorted (path, kind, mode, content) records: a tree's content id."""
    h = hashlib.sha256()
    for path in sorted(tree):
        e = tree[path]
        body = os.fsencode(e.target) if e.kind == "symlink" and e.target else e.data
        head = f"{path}\0{e.kind}\0{e.mode & 0o7777:o}\0{len(body)}\0"
        h.update(head.encode("utf-8", "surrogateescape"))
        h.update(body)
    return h.hexdigest()


def read_tree(root: str | os.PathLike[str], *, allow_outside_links: bool = False) -> FileTree:
    """Read a folder into a tree. Symlinks are kept as links; a link that points outside
    ``root`` is a :class:`CardError` unless ``allow_outside_links``. Sockets, devices and
    FIFOs are refused."""
    root = Path(root)
    if not root.is_dir():
        raise CardError(f"folder {str(root)!r} does not exist", where=str(root),
                        fix="create it or point at the right folder")
    real_root = root.resolve()
    tree: FileTree = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(root)
        if not filenames and not dirnames and str(rel_dir) != ".":
            tree[rel_dir.as_posix()] = FileEntry.directory(stat.S_IMODE(os.stat(dirpath).st_mode))
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = Path(dirpath) / name
            rel = (rel_dir / name).as_posix()
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(full)
                resolved = (full.parent / target).resolve()
                if not allow_outside_links and not resolved.is_relative_to(real_root):
                    raise CardError(f"symlink {rel!r} points outside the folder ({target!r})",
                                    where=str(full), fix="replace the link with a real file")
                tree[rel] = FileEntry.symlink(target)
            elif stat.S_ISREG(st.st_mode):
                tree[rel] = FileEntry(full.read_bytes(), stat.S_IMODE(st.st_mode))
            else:
                raise CardError(f"{rel!r} is not a regular file, folder or symlink",
                                where=str(full), fix="remove it from the folder")
    return tree


def write_tree(tree: Mapping[str, FileEntry], root: str | os.PathLike[str]) -> None:
    """Materialise a tree under ``root`` (created if missing). Paths are re-checked."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for path in sorted(tree):
        rel = check_relpath(path)
        e = tree[path]
        dest = root / rel
        _no_link_above(root, rel)  # a symlink "a" in the tree must not carry "a/x" elsewhere
        dest.parent.mkdir(parents=True, exist_ok=True)
        if e.kind == "dir":
            if dest.is_symlink():
                raise CardError(f"{rel!r} is both a symlink and a folder in the tree",
                                fix="keep one of the two entries")
            dest.mkdir(exist_ok=True)
            os.chmod(dest, e.mode & 0o7777)
        elif e.kind == "symlink":
            if dest.is_symlink() or dest.exists():
                dest.unlink()
            os.symlink(e.target or "", dest)
        else:
            if dest.is_symlink():  # never write through a link
                dest.unlink()
            dest.write_bytes(e.data)
            os.chmod(dest, e.mode & 0o7777)


def _no_link_above(root: Path, rel: str) -> None:
    parts = rel.split("/")[:-1]
    cur = root
    for part in parts:
        cur = cur / part
        if cur.is_symlink():
            raise CardError(f"{rel!r} lies below the symlink {cur.relative_to(root).as_posix()!r}"
                            " in the same tree", fix="replace the link with a real folder")
