"""Grading-time services (issue 15): a card that keeps its episode's processes is graded in
the live sandbox, so a server its solution started still answers; the same card graded in
a fresh fork (the default) loses it. Also the script readers behind the importer."""

from __future__ import annotations

from pathlib import Path

import pytest

from ceiling.cards import Acceptance, TaskCard
from ceiling.check import validate
from ceiling.importers._scripts import read_test_sh, split_solution
from ceiling.sandbox._launch import namespaces_available

needs_ns = pytest.mark.skipif(namespaces_available() is not None,
                              reason=f"namespace backend unavailable: {namespaces_available()}")
SERVER = ("import http.server as h\n"
          "class H(h.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        self.send_response(200); self.end_headers(); self.wfile.write(b'up')\n"
          "h.HTTPServer(('127.0.0.1', 8766), H).serve_forever()\n")
TEST = ("import time, urllib.request\n\n\n"
        "def test_server_answers():\n"
        "    for _ in range(30):\n"
        "        try:\n"
        "            assert urllib.request.urlopen('http://127.0.0.1:8766/').read() == b'up'\n"
        "            return\n"
        "        except OSError:\n"
        "            time.sleep(0.1)\n"
        "    raise AssertionError('no server')\n")


def _card(keep: bool) -> TaskCard:
    card = TaskCard(id=f"harbor/live-server-v1@keep={int(keep)}", type="terminal_ops",
                    horizon="short", instruction="Start the server in srv.py in the background.",
                    acceptance=Acceptance(runner="inprocess", keep_processes=keep))
    card.with_files(workspace={"srv.py": SERVER}, tests={"test_srv.py": TEST})
    card.solution = "nohup python3 srv.py >/dev/null 2>&1 &\nsleep 0.5\n"
    return card


@needs_ns
def test_kept_processes_serve_the_tests_a_fresh_fork_does_not(tmp_path: Path) -> None:
    live = validate([_card(True)], repeats=1, exploits_per_card=0, quarantine=tmp_path / "q")
    assert (live["oracle_solved"], live["null_solved"]) == (1, 0), live
    fork = validate([_card(False)], repeats=1, exploits_per_card=0, quarantine=tmp_path / "q")
    assert fork["oracle_solved"] == 0, fork  # the server died with the episode's sandbox


def test_test_sh_is_sorted_into_what_a_card_can_carry() -> None:
    plan = read_test_sh(
        "#!/bin/bash\napt-get update\napt-get install -y curl sqlite3\n"
        "curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh\nsource $HOME/.local/bin/env\n"
        "cd /app\nnohup python3 /app/srv.py > /tmp/s.log 2>&1 &\nsleep 2\n"
        "uvx -p 3.13 -w pytest==8.4.1 -w numpy==2.1 pytest --ctrf /logs/verifier/ctrf.json "
        "/tests/test_outputs.py -rA\n"
        "if [ $? -eq 0 ]; then\n  echo 1 > /logs/verifier/reward.txt\nelse\n"
        "  echo 0 > /logs/verifier/reward.txt\nfi\n")
    assert plan.refusals == []
    assert (plan.apt, plan.targets) == (["sqlite3"], ["/tests/test_outputs.py"])
    assert plan.pip == ["pytest==8.4.1", "numpy==2.1"]
    assert (plan.service, plan.service_wait_s) == ("python3 /app/srv.py > /tmp/s.log 2>&1", 2.0)
    bad = read_test_sh("#!/bin/bash\nmake -C /app check\npytest /tests\n")
    assert [r[0] for r in bad.refusals] == ["tests:test.sh command"]


def test_solution_installs_move_to_the_image_and_heredocs_stay() -> None:
    script, apt, pip, bg = split_solution(
        "#!/bin/bash\nset -e\napt-get update && apt-get install -y jq && cd /app\n"
        "pip install requests==2.32.3\ncat > a.py <<'EOF'\npip install nothing\nEOF\n"
        "python3 a.py &\n")
    assert (apt, pip, bg) == (["jq"], ["requests==2.32.3"], True)
    assert "cd /app" in script and "pip install nothing" in script  # heredoc body untouched
    assert "apt-get" not in script and "requests" not in script
