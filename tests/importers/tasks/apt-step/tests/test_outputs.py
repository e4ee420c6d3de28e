import subprocess
from pathlib import Path


def test_pv_installed():
    assert subprocess.run(["pv", "--version"], check=False, capture_output=True).returncode == 0


def test_copy_matches():
    src = Path("/app/input.bin").read_bytes()
    assert len(src) == 4096
    assert Path("/app/copy.bin").read_bytes() == src
