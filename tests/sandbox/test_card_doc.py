"""docs/task-cards.md's complete example is a real card: it loads, the verifier grades its
oracle's episode as solved (the hidden tests use the ``subject`` fixture and ``WORKSPACE``),
and an agent that submits at once passes none of its hidden tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ceiling import load_card
from ceiling.check import run_plan
from ceiling.sandbox import namespaces_available
from ceiling.verify import Outcome, null_plan, oracle_plan

DOC = Path(__file__).resolve().parents[2] / "docs" / "task-cards.md"
BLOCK = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.DOTALL)


def _card_folder(tmp_path: Path) -> Path:
    files = BLOCK.findall(DOC.read_text())
    assert {"task.yaml", "solution.sh", "tests/test_rotate.py"} <= {f for f, _ in files}
    for name, body in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    return tmp_path


def test_doc_example_card_loads(tmp_path: Path) -> None:
    card = load_card(_card_folder(tmp_path))
    assert set(card.workspace) == {"logs/app.log", "logs/app.log.1", "config/rotate.conf"}
    assert card.content_id() == load_card(tmp_path).content_id()


@pytest.mark.skipif(namespaces_available() is not None, reason="needs the namespace backend")
def test_doc_example_oracle_passes_null_fails(tmp_path: Path) -> None:
    card = load_card(_card_folder(tmp_path))
    assert card.id == "terminal_ops/log-rotate-v1" and card.acceptance.runner == "subject"
    assert "def test_current_is_empty(subject)" in card.tests["test_rotate.py"].data.decode()
    v, _ = run_plan(card, null_plan())
    assert v.outcome is Outcome.FAILED and {t.status for t in v.tests} == {"failed"}, v
    v, _ = run_plan(card, oracle_plan())
    assert v.outcome is Outcome.SOLVED and v.milestones == {"moved-current": True}, v
    assert v.detail["grading"] == "host"
