"""The project's baseline: which of its tests pass, reliably, under the card grader, and
which library functions each of them runs.

1. The whole test suite runs **twice** through the hardened in-process grader
   (:func:`ceiling.verify._grader.grade_in_sandbox`, the same one that grades the cards)
   in a namespace sandbox over the pristine project. Tests that pass both times are
   *stable*; tests whose result differs are *flaky* (recorded, never used); the rest fail
   under the grader (a missing conftest fixture, a relative import, a network call) and are
   never used either.
2. A third, plain pytest run with a profile hook (:mod:`._covrun`, in the sandbox) maps each
   test to the workspace functions it calls (``relpath:first line``): bugs go only into
   functions some stable test runs, and a candidate's hidden tests are the test files that
   run the mutated functions.

The result is cached as ``baseline.json`` so a resumed synth does not pay for it again.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ..cards import FileEntry, FileTree
from ._hidden import flat_names, hidden_tests
from ._source import Project

COVRUN = Path(__file__).with_name("_covrun.py")


@dataclass
class Baseline:
    names: dict[str, str]  # source test path -> hidden file name
    stable: list[str]  # node ids that passed both runs
    flaky: list[str]
    failing: list[str]
    coverage: dict[str, list[str]]  # "relpath:firstline" -> stable node ids that run it
    run_s: float  # seconds of one full grader run
    per_file: dict[str, int] = field(default_factory=dict)  # hidden file -> stable tests
    flagged: list[str] = field(default_factory=list)  # tests the hardened grader flags
    # source test files that do not even import under the grader (a test dependency the
    # runtime lacks...): file -> the last line of the collection error; never used
    uncollectable: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Baseline:
        return cls(**json.loads(text))


def _grade(tree: FileTree, tests: FileTree, backend: str, timeout: float) -> tuple[Any, float]:
    from ..sandbox import Limits, open_sandbox
    from ..verify import grade_in_sandbox

    t0 = time.perf_counter()
    sb = open_sandbox([tree], backend=backend, limits=Limits(command_timeout_s=timeout,
                                                             cpu_s=int(timeout) + 30))
    try:
        res = grade_in_sandbox(tests, sb, timeout)
    finally:
        sb.close()
    return res, time.perf_counter() - t0


def _coverage(tree: FileTree, tests: FileTree, backend: str, timeout: float) -> dict[str, Any]:
    from ..sandbox import Limits, open_sandbox

    sb = open_sandbox([tree], backend=backend, limits=Limits(
        command_timeout_s=timeout, cpu_s=int(timeout) + 30, max_output_bytes=64 << 20))
    try:
        root = "/tmp/.ceiling-cov"
        for name, e in tests.items():
            sb.write(f"{root}/tests/{name}", e.data)
        sb.write(f"{root}/run.py", COVRUN.read_bytes())
        sb.write(f"{root}/pytest.ini", b"[pytest]\npython_files = test_*.py *_test.py\n")
        argv = [sb.python, "-I", f"{root}/run.py", "--", "-p", "no:cacheprovider",
                "--noconftest", "-o", "addopts=", "-q", "-c", f"{root}/pytest.ini",
                "--rootdir", f"{root}/tests", f"{root}/tests"]
        r = sb.exec(argv, timeout=timeout, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                                                "PYTHONDONTWRITEBYTECODE": "1", "HOME": root})
        try:
            data: dict[str, Any] = json.loads(r.stdout)
        except json.JSONDecodeError:
            raise ConfigError("the coverage run of the project's tests gave no result "
                              f"(exit {r.exit_code}): {r.stderr[-300:]}", where="baseline",
                              fix="check that the test suite runs with plain pytest") from None
        return data
    finally:
        sb.close()


def run_baseline(project: Project, *, backend: str = "namespace",
                 timeout: float = 300.0) -> Baseline:
    """Measure the baseline of ``project`` (see the module docstring)."""
    names = flat_names(project.test_files)
    tests = hidden_tests(project.tree, project.test_files, project.import_root)
    r1, s1 = _grade(project.tree, tests, backend, timeout)
    # one file that fails to import stops pytest's whole session: run again without the
    # files that did not collect, and record why they are left out
    uncollectable = {src: _last_line(r1.collect_errors[name]) for src, name in names.items()
                     if name in r1.collect_errors}
    if uncollectable and len(uncollectable) < len(names):
        tests = hidden_tests(project.tree, [f for f in project.test_files
                                            if f not in uncollectable], project.import_root)
        r1, s1 = _grade(project.tree, tests, backend, timeout)
    r2, _ = _grade(project.tree, tests, backend, timeout)
    if not r1.started or r1.timed_out:
        raise ConfigError(f"the project's tests did not run under the grader (exit "
                          f"{r1.exit_code}, timed out {r1.timed_out}): {r1.stderr[-300:]}",
                          where=project.source, fix="pick a project whose tests run in "
                          f"under {int(timeout)} s with plain pytest")
    canaries = {r1.canary_pass, r1.canary_fail, r2.canary_pass, r2.canary_fail}
    ids = sorted((set(r1.status) | set(r2.status)) - canaries)
    # tests the hardened grader flags (an object whose == answers anything, a tamper
    # record) would read as hacks on every card: never use them
    flagged = {h.rsplit(" (", 1)[0] for r in (r1, r2) for h in r.eq_hacks}
    flagged |= {t.rsplit("(during ", 1)[-1].rstrip(")") for r in (r1, r2) for t in r.tamper}
    # the results channel's cross-check names the test it doubts (unittest.TestCase tests
    # have no record of their call under the in-process runner): never use those
    flagged |= {m[1] for r in (r1, r2) for t in r.tamper
                if (m := re.match(r"results channel: (\S+) reported", t))}
    if any("(during collection)" in t for r in (r1, r2) for t in r.tamper):
        raise ConfigError("the hardened in-process grader flags the project's own code as "
                          f"tampering: {(r1.tamper or r2.tamper)[0]}", where=project.source,
                          fix="pick another project (docs/verifier.md: code that needs "
                          "ctypes or tracing cannot be graded in-process)")
    stable = [i for i in ids if r1.status.get(i) == "passed" and r2.status.get(i) == "passed"
              and i not in flagged]
    flaky = [i for i in ids if (r1.status.get(i) == "passed") != (r2.status.get(i) == "passed")]
    failing = [i for i in ids if i not in stable and i not in flaky]  # flagged ones too
    cov = _coverage(project.tree, tests, backend, timeout)
    stable_set = set(stable)
    by_func: dict[str, list[str]] = {}
    for nid, funcs in cov.get("coverage", {}).items():
        if nid not in stable_set:
            continue
        for f in funcs:
            by_func.setdefault(f, []).append(nid)
    per_file: dict[str, int] = {}
    for nid in stable:
        f = nid.split("::", 1)[0]
        per_file[f] = per_file.get(f, 0) + 1
    return Baseline(names=names, stable=stable, flaky=flaky, failing=failing,
                    coverage={k: sorted(v) for k, v in sorted(by_func.items())},
                    run_s=round(s1, 3), per_file=per_file, flagged=sorted(flagged),
                    uncollectable=uncollectable)


def _last_line(message: str) -> str:
    lines = [x.strip() for x in message.strip().splitlines() if x.strip()]
    return (lines[-1] if lines else "")[:300]


def load_or_run(project: Project, cache: Path, *, backend: str = "namespace",
                timeout: float = 300.0) -> Baseline:
    """The cached baseline in ``cache`` (a file) when it exists, else a fresh one."""
    if cache.is_file():
        return Baseline.from_json(cache.read_text())
    b = run_baseline(project, backend=backend, timeout=timeout)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(b.as_json())
    tmp.replace(cache)
    return b


def tests_tree(project: Project, files: list[str]) -> FileTree:
    """Hidden tests for the given source test files."""
    return hidden_tests(project.tree, files, project.import_root)


__all__ = ["Baseline", "FileEntry", "load_or_run", "run_baseline", "tests_tree"]
