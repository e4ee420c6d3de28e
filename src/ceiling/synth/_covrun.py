"""Shipped into a sandbox and run as ``python -I _covrun.py ROOT -- PYTEST_ARGS``: pytest
over the pristine project with a profile hook that records, per test node id, which
workspace functions ran (``relpath:first line``) and the test's outcome. One JSON object on
the original stdout at the end. Plain pytest, not the hardened grader: this measures the
untouched project (trusted), once per project. Standard library and pytest only."""

import json
import os
import sys


def _main():
    out_fd = os.dup(1)
    os.dup2(2, 1)
    args = sys.argv[sys.argv.index("--") + 1:]
    ws = os.path.realpath(os.environ.get("WORKSPACE", "/workspace")).rstrip("/") + "/"
    cov = {}
    outcome = {}
    cur = [None]

    def prof(frame, event, arg):
        if event == "call" and cur[0] is not None:
            f = frame.f_code.co_filename
            if f.startswith(ws):
                cov[cur[0]].add(f"{f[len(ws):]}:{frame.f_code.co_firstlineno}")

    import pytest

    class Plugin:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(self, item, nextitem):
            cur[0] = item.nodeid
            cov.setdefault(item.nodeid, set())
            sys.setprofile(prof)
            try:
                yield
            finally:
                sys.setprofile(None)
                cur[0] = None

        def pytest_runtest_logreport(self, report):
            prev = outcome.get(report.nodeid, "passed")
            if report.failed:
                outcome[report.nodeid] = "failed"
            elif report.skipped and prev == "passed":
                outcome[report.nodeid] = "skipped"
            else:
                outcome.setdefault(report.nodeid, prev)

    pytest.main(args, plugins=[Plugin()])
    data = json.dumps({"coverage": {k: sorted(v) for k, v in cov.items()},
                       "outcome": outcome}).encode()
    while data:
        data = data[os.write(out_fd, data):]


if __name__ == "__main__":
    _main()
