"""docs/task-cards.md's complete example is a real card: it loads, its oracle passes its hidden
tests in a namespace sandbox, and the untouched workspace fails them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ceiling import load_card
from ceiling.sandbox import Sandbox, open_sandbox
from ceiling.sandbox._namespace import namespaces_available

DOC = Path(__file__).resolve().parents[2] / "docs" / "task-cards.md"
BLOCK = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.DOTALL)


def _card_folder(tmp_path: Path) -> Path:
    files = BLOCK.findall(DOC.read_text())
    assert {"task.yaml", "solution.sh", "tests/test_rotate.py"} <= {f for f, _ in files}
    for name, body in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    return tmp_path


def _passed(sb: Sandbox, tests: dict, ids: list[str]) -> set[str]:
    for path, entry in tests.items():
        sb.write(f"/tmp/hidden/{path}", entry.data)
    r = sb.exec([sb.python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                 "/tmp/hidden"], cwd="/tmp/hidden")
    return {i for i in ids if f"PASSED {i}" in r.stdout}


def test_doc_example_card_loads(tmp_path: Path) -> None:
    card = load_card(_card_folder(tmp_path))
    assert set(card.workspace) == {"logs/app.log", "logs/app.log.1", "config/rotate.conf"}
    assert card.content_id() == load_card(tmp_path).content_id()


@pytest.mark.skipif(namespaces_available() is not None, reason="needs the namespace backend")
def test_doc_example_oracle_passes_null_fails(tmp_path: Path) -> None:
    card = load_card(_card_folder(tmp_path))
    assert card.id == "terminal_ops/log-rotate-v1" and card.acceptance.runner == "files"
    ids = card.acceptance.tests
    with open_sandbox(card.layers) as sb:
        assert _passed(sb, card.tests, ids) == set()
        sb.reset()
        r = sb.exec(["sh", "-c", card.solution])
        assert r.exit_code == 0, r.stderr
        assert sb.exec(card.milestones[0].check).exit_code == 0
        assert _passed(sb, card.tests, ids) == set(ids)
