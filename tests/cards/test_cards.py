from pathlib import Path

import pytest

from ceiling import CardError, FileEntry, TaskCard, load_card, save_card


def _card() -> TaskCard:
    card = TaskCard(id="terminal_ops/hello-v1", type="terminal_ops", horizon="short",
                    instruction="Create hello.txt containing hi.")
    return card.with_files(workspace={"README": "x"}, tests={"test_t.py": "def test_a(): pass\n"})


def test_roundtrip_keeps_content_id(tmp_path: Path) -> None:
    card = _card()
    card.solution = "echo hi > hello.txt\n"
    save_card(card, tmp_path / "c")
    back = load_card(tmp_path / "c")
    assert back.content_id() == card.content_id()
    assert back.workspace["README"] == FileEntry(b"x", 0o644)


def test_unknown_field_names_file_field_and_fix(tmp_path: Path) -> None:
    save_card(_card(), tmp_path / "c")
    y = tmp_path / "c" / "task.yaml"
    y.write_text(y.read_text() + "instructon: typo\n")
    with pytest.raises(CardError) as e:
        load_card(tmp_path / "c")
    msg = str(e.value)
    assert "task.yaml" in msg and "instructon" in msg and "instruction" in msg


def test_symlink_out_of_card_is_refused(tmp_path: Path) -> None:
    save_card(_card(), tmp_path / "c")
    (tmp_path / "c" / "workspace" / "evil").symlink_to("/etc/passwd")
    with pytest.raises(CardError, match="outside"):
        load_card(tmp_path / "c")


def test_missing_workspace(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "task.yaml").write_text(
        "id: terminal_ops/a-v1\ntype: terminal_ops\nhorizon: short\ninstruction: x\n")
    with pytest.raises(CardError, match="workspace"):
        load_card(tmp_path / "c")
