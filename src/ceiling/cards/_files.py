"""File trees now live in the floor module :mod:`ceiling._tree`; re-exported here so every
``from ceiling.cards._files import ...`` keeps working."""

from .._tree import FileEntry, FileTree, Kind, check_relpath, read_tree, tree_hash, write_tree

__all__ = ["FileEntry", "FileTree", "Kind", "check_relpath", "read_tree", "tree_hash",
           "write_tree"]
