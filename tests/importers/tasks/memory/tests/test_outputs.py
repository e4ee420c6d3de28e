from pathlib import Path


def test_held():
    assert Path("/app/held.txt").read_text().strip() == "1100"
