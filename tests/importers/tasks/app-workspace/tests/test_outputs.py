import os
from pathlib import Path


def test_sum_written():
    assert os.getcwd() == "/app"  # the tests run where the task's WORKDIR is, as in Harbor
    assert Path("/app/sum.txt").read_text().strip() == "42"
    assert Path("sum.txt").resolve() == Path("/app/sum.txt")
