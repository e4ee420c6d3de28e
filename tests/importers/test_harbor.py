"""The six Harbor-format task folders (one per feature) are imported, validated (oracle
passes, null fails) and evaluated with ``scripted:oracle``, through the CLI as a user runs
them: `/app` workspace, an apt step, a pip step, a service the tests call, a solution that
commits and clones with git, a task that needs more memory than the default."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling._errors import CardError
from ceiling.cards import card_limits, load_card
from ceiling.sandbox._launch import namespaces_available

TASKS = Path(__file__).with_name("tasks")
needs_ns = pytest.mark.skipif(namespaces_available() is not None,
                              reason=f"namespace backend unavailable: {namespaces_available()}")

CLI = str(Path(sys.executable).with_name("ceiling"))
NAMES = ["app-workspace", "apt-step", "git-commit", "memory", "pip-step", "service"]


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


@needs_ns
def test_import_validate_and_eval_every_feature(tmp_path: Path) -> None:
    out = tmp_path / "cards"
    r = _cli("import", "harbor", str(TASKS), "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(r.stdout)
    assert (rep["tasks"], rep["imported"], rep["refused"]) == (6, 6, 0), rep
    assert sorted(p.name for p in out.iterdir()) == NAMES

    cards = {n: load_card(out / n) for n in NAMES}
    assert all(c.environment.workdir == "/app" for c in cards.values())
    assert cards["service"].acceptance.service == "python3 /app/server.py > /tmp/server.log 2>&1"
    assert cards["memory"].environment.limits.memory_mb == 1536
    apt = [s.run for s in cards["apt-step"].environment.image if s.run and "pv" in s.run]
    assert apt and "apt-get install" in apt[0]
    assert (out / "git-commit" / "workspace" / "repo" / ".git" / "HEAD").is_file()  # built
    assert "python3 /tmp/ceiling-solution/solve.sh" in cards["pip-step"].solution  # shebang

    r = _cli("envs", "validate", str(out), "--repeats", "1", "--exploits", "0", "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    val = json.loads(r.stdout)
    assert (val["cards"], val["oracle_solved"], val["null_solved"]) == (6, 6, 0), val
    r = _cli("eval", "--policy", "scripted:oracle", "--suite", str(out), "--name",
             "harbor-oracle", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout)
    assert (summary["episodes"], summary["pass@1"]["value"]) == (6, 1.0), summary
    assert summary["outcomes"]["solved"] == 6


def test_card_limits_stay_under_the_operator_maximum(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    from ceiling.importers import build_card

    card, _ = build_card(TASKS / "memory")
    card.environment.image = []  # only the limits are under test here: nothing to build
    monkeypatch.setenv("CEILING_MAX_MEMORY_MB", "1024")
    with pytest.raises(CardError, match="memory_mb 1536 is above the operator's maximum 1024"):
        card_limits(card)
    monkeypatch.setenv("CEILING_MAX_MEMORY_MB", "4096")
    lim = card_limits(card)
    assert (lim.memory_mb, lim.workdir, lim.home) == (1536, "/app", "/home/agent")
    assert lim.disk_mb <= lim.memory_mb  # the writable space is a tmpfs counted as memory
