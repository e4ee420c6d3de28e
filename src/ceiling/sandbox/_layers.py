"""Content-addressed store of read-only layers.

A layer is a directory tree named by its :func:`~ceiling.cards.tree_hash`; identical trees
are stored once. The store lives under ``$CEILING_HOME/layers`` (default ``~/.ceiling``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ..cards import FileEntry, read_tree, tree_hash, write_tree


def ceiling_home() -> Path:
    return Path(os.environ.get("CEILING_HOME", Path.home() / ".ceiling"))


class LayerStore:
    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else ceiling_home() / "layers"
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, layer_id: str) -> Path:
        p = self.root / layer_id
        if not p.is_dir():
            raise KeyError(f"no layer {layer_id!r} in {self.root}")
        return p

    def has(self, layer_id: str) -> bool:
        return (self.root / layer_id).is_dir()

    def put_tree(self, tree: Mapping[str, FileEntry]) -> str:
        """Store a tree (no-op if already stored) and return its layer id."""
        lid = tree_hash(tree)
        if not self.has(lid):
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
            write_tree(tree, tmp)
            try:
                tmp.rename(self.root / lid)
            except OSError:  # a concurrent writer stored the same tree first
                shutil.rmtree(tmp, ignore_errors=True)
        return lid

    def put_dir(self, src: str | os.PathLike[str]) -> str:
        """Store a host directory's current content as a layer."""
        return self.put_tree(read_tree(src, allow_outside_links=True))
