"""The floor file-tree module: materialising a tree never writes through a symlink."""

from __future__ import annotations

from pathlib import Path

import pytest

from ceiling._errors import CardError
from ceiling.cards import FileEntry, write_tree


def test_a_file_below_a_symlink_of_the_same_tree_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    tree = {"a": FileEntry.symlink(str(outside)), "a/x": FileEntry(b"owned\n")}
    with pytest.raises(CardError, match="below the symlink"):
        write_tree(tree, tmp_path / "root")
    assert not (outside / "x").exists()


def test_a_file_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("keep\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "f").symlink_to(target)
    write_tree({"f": FileEntry(b"new\n")}, root)
    assert target.read_text() == "keep\n"
    assert (root / "f").read_bytes() == b"new\n" and not (root / "f").is_symlink()
