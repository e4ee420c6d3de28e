import subprocess
from pathlib import Path


def git(*args, cwd="/app/repo"):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def test_committed():
    assert git("log", "-1", "--format=%s").strip() == "fix greeting"
    assert git("show", "HEAD:greeting.txt") == "hello, world\n"
    assert git("log", "--format=%s").split("\n")[1] == "initial"


def test_cloned():
    assert Path("/app/clone/greeting.txt").read_text() == "hello, world\n"
    assert git("log", "-1", "--format=%s", cwd="/app/clone").strip() == "fix greeting"
