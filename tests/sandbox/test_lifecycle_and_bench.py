"""Nothing outlives a sandbox: close(), interpreter exit and a killed host process all leave no
process, mount, cgroup or temp folder. And the bench prints the JSON keys issue 2 lists."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ceiling.cli import main
from ceiling.sandbox import namespaces_available, open_sandbox
from ceiling.sandbox._launch import POOL

pytestmark = pytest.mark.skipif(namespaces_available() is not None,
                                reason=f"namespace backend unavailable: {namespaces_available()}")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pids: list[int], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.02)
    return False


def _cgroups_of(pid: int) -> list[Path]:
    roots = [Path("/sys/fs/cgroup/pids/ceiling"), Path("/sys/fs/cgroup/memory/ceiling"),
             Path("/sys/fs/cgroup/ceiling")]
    return [d for r in roots if r.is_dir() for d in r.iterdir() if d.name.startswith(f"{pid}-")]


def test_close_leaves_nothing(tree: dict) -> None:
    mounts = Path("/proc/self/mountinfo").read_text()
    sb = open_sandbox([tree])
    sb.exec("sleep 100 >/dev/null 2>&1 &")
    h = sb._h  # type: ignore[attr-defined]
    pids = [h.proc.pid, h.host_pid]
    groups = h.cgroup.dirs if h.cgroup else []
    assert all(_alive(p) for p in pids) and all(g.is_dir() for g in groups)
    sb.close()
    sb.close()  # idempotent
    assert _wait_gone(pids)
    assert not any(g.exists() for g in groups)
    assert Path("/proc/self/mountinfo").read_text() == mounts
    POOL.drain()  # the warm spare is released too
    assert _cgroups_of(os.getpid()) == []


SCRIPT = """
import sys, time
from ceiling.sandbox import open_sandbox
sb = open_sandbox([{}])
sb.exec("sleep 100 >/dev/null 2>&1 &")
h = sb._h
print(h.proc.pid, h.host_pid, flush=True)
if sys.argv[1] == "hang":
    time.sleep(100)
"""


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_host_exit_or_crash_leaves_no_process(how: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, "exit" if how == "exit" else "hang"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pids = [int(x) for x in proc.stdout.readline().split()]
    if how == "sigkill":
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert len(pids) == 2 and _wait_gone(pids)
    if how == "exit":
        assert _cgroups_of(proc.pid) == []


def test_bench_sandbox_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", "sandbox", "--json", "--sizes", "5,10,20", "--reps", "3", "--cycles",
              "3", "--episode-seconds", "0.1"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    for n in ("5", "10", "20"):
        r = out["reset"][n]
        assert r["p50_ms"] > 0 and r["p95_ms"] >= r["p50_ms"] and r["copy_p50_ms"] > 0
    for k in ("exec_overhead_p50_ms", "checkpoint_p50_ms", "fork_p50_ms", "fork_cold_p50_ms",
              "freeze_p50_ms", "freeze_copytree_p50_ms"):
        assert isinstance(out[k], float)
    assert set(out["episodes_per_s"]) == {"1", "2"} and out["episodes_per_s"]["1"] > 0
    assert out["leaks"]["mounts"] == 0 and out["leaks"]["processes"] == 0
    assert out["leaks"]["tmpdirs"] == 0 and out["leaks"]["cgroups"] == 0


def test_bench_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", "sandbox", "--sizes", "ten"])
    assert e.value.code == 2 and "--sizes" in capsys.readouterr().err
