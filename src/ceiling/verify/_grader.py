"""Grading results shared by both graders, and the in-process grader.

Both graders write the hidden tests, two *canary* tests (random names; one must pass, one
must fail) and ``grader.ini`` to a fresh grader folder (never the workspace) and call
``pytest.main`` with ``-p no:cacheprovider --noconftest -o addopts= -c grader.ini --rootdir
<tests>`` and ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` plus a recorder plugin that writes one JSON
line per event (start, collected ids, each test phase's outcome, collection errors, end), so a
process that dies half-way still leaves the results it produced. Results are read by node id
against the card's expected ids; the exit code is never trusted.

- ``runner: subject`` / ``files``: :mod:`._host` (pytest on the host, outside every sandbox).
- ``runner: inprocess`` / ``sandbox``: :func:`grade_in_sandbox` runs
  :mod:`._inproc_runner` inside the grading sandbox (the tests import workspace code there),
  hardened with an audit hook, identity snapshots and a sequenced results channel; its
  limits are stated in that module and in docs/verifier.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cards import FileEntry, write_tree

RUNNER_PATH = Path(__file__).with_name("_inproc_runner.py")

INI = ("[pytest]\npython_files = test_*.py *_test.py\nxfail_strict = true\n"
       "enable_assertion_pass_hook = true\n")


@dataclass
class GradeResult:
    """What the grader reported. ``status`` maps node id -> passed/failed/error/skipped."""

    status: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    collected: list[str] = field(default_factory=list)
    collect_errors: dict[str, str] = field(default_factory=dict)
    eq_hacks: list[str] = field(default_factory=list)
    tamper: list[str] = field(default_factory=list)
    started: bool = False
    ended: bool = False
    timed_out: bool = False
    exit_code: int | None = None
    stderr: str = ""
    canary_pass: str = ""
    canary_fail: str = ""
    duration_s: float = 0.0

    def canaries_ok(self) -> bool | None:
        """True when both canaries behaved; False when reporting was tampered; None when
        the canaries never ran."""
        p, f = self.status.get(self.canary_pass), self.status.get(self.canary_fail)
        if p is None and f is None:
            return None
        return p == "passed" and f == "failed"


def _canary_file(nonce: str) -> tuple[str, str, str, str]:
    name = f"test_000_canary_{nonce}.py"
    body = (f"def test_pass_{nonce}():\n    assert [1, 2] == [1, 2]\n\n\n"
            f"def test_fail_{nonce}():\n    assert 1 == 2, 'canary must fail'\n")
    return name, body, f"{name}::test_pass_{nonce}", f"{name}::test_fail_{nonce}"


def _cross_check(reports: dict[str, list[dict[str, Any]]], ran: dict[str, bool],
                 res: GradeResult) -> None:
    """A call reported as passed must have a record, taken around the test function before
    any report existed, that it ran and did not raise; else the report was forged."""
    for nid, evs in reports.items():
        if any(e.get("when") == "call" and e.get("outcome") == "passed" for e in evs) and \
                ran.get(nid, True):
            why = "raised" if nid in ran else "has no record of running"
            res.tamper.append(f"results channel: {nid} reported passed but its call {why}")


def _signed(ev: dict[str, Any], key: bytes) -> bool:
    mac = ev.pop("mac", None)
    body = json.dumps(ev, sort_keys=True).encode()
    return isinstance(mac, str) and hmac.compare_digest(
        mac, hmac.new(key, body, hashlib.sha256).hexdigest())


def _combine(events: list[dict[str, Any]], res: GradeResult, *, sequenced: bool = False,
             key: bytes | None = None) -> None:
    """Fold recorder events into ``res``. With ``sequenced`` (the in-process runner), every
    record must carry the next sequence number (and, with ``key``, its HMAC); anything else
    is recorded as tampering with the results channel and the records after it are
    ignored."""
    reports: dict[str, list[dict[str, Any]]] = {}
    ran: dict[str, bool] = {}  # the in-process runner's second record: did the call raise
    sub_failed: dict[str, dict[str, Any]] = {}  # first failed subtest (unittest subTest) per test
    seen: set[tuple[str, str]] = set()
    for i, ev in enumerate(events):
        if key is not None and not _signed(ev, key):
            res.tamper.append(f"results channel: record {i} is not signed by the runner "
                              "(forged lines)")
            break
        if sequenced and ev.get("seq") != i:
            res.tamper.append(f"results channel: record {i} out of sequence (forged lines)")
            break
        kind = ev.get("event")
        if kind == "test":
            phase = (str(ev.get("nodeid")), str(ev.get("when")))
            if phase in seen:
                res.tamper.append(f"results channel: {phase[0]} {phase[1]} reported twice")
                continue
            seen.add(phase)
        if kind == "tamper":
            res.tamper.append(f"{ev.get('what')} (during {ev.get('nodeid') or 'collection'})")
        if kind == "start":
            res.started = True
        elif kind == "end":
            res.ended = True
        elif kind == "collected":
            res.collected = [str(x) for x in ev.get("ids", [])]
        elif kind == "eq_hack":
            res.eq_hacks.append(f"{ev.get('nodeid')} ({ev.get('op')})")
        elif kind == "collect_error":
            res.collect_errors[str(ev.get("nodeid"))] = str(ev.get("message", ""))
        elif kind == "test":
            reports.setdefault(str(ev.get("nodeid")), []).append(ev)
        elif kind == "ran":
            ran[str(ev.get("nodeid"))] = bool(ev.get("raised"))
        elif kind == "subtest" and ev.get("outcome") == "failed":
            sub_failed.setdefault(str(ev.get("nodeid")), ev)
    if sequenced:
        _cross_check(reports, ran, res)
    for nid, evs in reports.items():
        bad = [e for e in evs if e.get("outcome") == "failed"
               or (e.get("outcome") == "passed" and e.get("xfail"))]
        call = [e for e in evs if e.get("when") == "call"]
        if bad:
            st = "failed" if bad[0].get("when") == "call" else "error"
            msg = str(bad[0].get("message", ""))
        elif call:
            skipped = call[0].get("outcome") == "skipped"
            st = ("failed" if call[0].get("xfail") else "skipped") if skipped else "passed"
            msg = str(call[0].get("message", ""))
        elif any(e.get("outcome") == "skipped" for e in evs):
            st, msg = "skipped", str(evs[0].get("message", ""))
        else:
            continue  # set up but never ran: the process died; reported as missing
        if st == "passed" and nid in sub_failed:  # pytest passes a test whose subtests failed
            sub = sub_failed[nid]
            st, msg = "failed", f"subtest {sub.get('label') or ''} failed: {sub.get('message', '')}"
        res.status[nid] = st
        if msg:
            res.messages[nid] = msg


def _parse(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(ev, dict):
            out.append(ev)
    return out


def _args(root: str) -> list[str]:
    return ["-p", "no:cacheprovider", "--noconftest", "-o", "addopts=", "-q",
            "-c", f"{root}/grader.ini", "--rootdir", f"{root}/tests", f"{root}/tests"]


def sandbox_dirs(sb: Any) -> tuple[str, Path, str]:
    """(``/tmp`` as commands see it, the same folder on the host, the workspace as commands
    see it) for a grading sandbox."""
    if getattr(sb, "backend", "") == "local":
        tmp = Path(sb._tmp)
        return str(tmp), tmp, str(sb.host_path())
    return "/tmp", Path(f"/proc/{sb._holder().host_pid}/root/tmp"), "/workspace"


def grade_in_sandbox(tests: Mapping[str, FileEntry], sandbox: Any, timeout: float) -> GradeResult:
    """Run the tests inside ``sandbox`` (a fresh sandbox over the final state) with the
    hardened in-process runner (:mod:`._inproc_runner`); results arrive on its stdout."""
    nonce = secrets.token_hex(8)
    name, body, cp, cf = _canary_file(nonce[:8])
    files = {f"tests/{k}": v for k, v in tests.items()}
    files[f"tests/{name}"] = FileEntry(body.encode())
    files["run.py"] = FileEntry(RUNNER_PATH.read_bytes())
    files["grader.ini"] = FileEntry(INI.encode())
    res = GradeResult(canary_pass=cp, canary_fail=cf)
    host_root: Path | None = None
    if getattr(sandbox, "backend", "") == "local":  # no private /tmp: use a host folder
        host_root = Path(tempfile.mkdtemp(prefix="ceiling-grade-"))
        write_tree(files, host_root)
        root = str(host_root)
    else:
        # written from the host, so the grader's folder and files belong to root, not to the
        # agent's uid: workspace code imported by one test module cannot rewrite another
        # before pytest collects it (nor the runner, its ini or the canaries)
        inner_tmp, host_tmp, _ = sandbox_dirs(sandbox)
        root = f"{inner_tmp}/.ceiling-grader-{nonce}"
        top = host_tmp / f".ceiling-grader-{nonce}"
        os.mkdir(top, 0o755)
        write_tree(files, top)
        for d, _subdirs, names in os.walk(top):  # never follows a symlink
            os.chmod(d, 0o755)
            for n in names:
                st = os.lstat(os.path.join(d, n))
                if not os.path.islink(os.path.join(d, n)):  # readable, writable by root only
                    os.chmod(os.path.join(d, n), (st.st_mode & 0o755) | 0o444)
    # the results travel on stdout: lift the output cap of this (private) grading sandbox
    sandbox.limits = sandbox.limits.model_copy(update={"max_output_bytes": 64 << 20})
    try:
        python = sandbox.python
        argv = [python, "-I", f"{root}/run.py", root, "--", *_args(root)]
        env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1",
               "HOME": root}
        key = secrets.token_hex(32).encode()
        r = sandbox.exec(argv, timeout=timeout, env=env, stdin=key + b"\n")
        res.exit_code, res.timed_out, res.stderr = r.exit_code, r.timed_out, r.stderr[-2000:]
        res.duration_s = r.duration_s
        _combine(_parse(r.stdout), res, sequenced=True, key=key)
        return res
    finally:
        if host_root is not None:
            shutil.rmtree(host_root, ignore_errors=True)
