"""The service scaffold every ``security_audit`` card shares, and the generator's probe.

A vulnerable service is a module ``service/app.py`` with two functions:

- ``make_state(data_dir, flag)``: set up the service's state (an in-memory SQLite database,
  files under ``data_dir``) with ``flag`` planted where only the vulnerability reaches it;
- ``handle(state, path, params) -> (status, body)``: answer one GET request.

``service/server.py`` (the same for every card) serves it on loopback for the agent. The
hidden tests and how they keep workspace code out of the grader are in ``_harness``; the
generator's own check that a card discriminates is :func:`probe`.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._harness import PROBE

TEST_FLAG = "FLAG{generator-probe-0000}"
DUMMY_FLAG = "FLAG{this-is-a-local-dummy-flag}"

SERVER = '''"""Serve the app on loopback: python3 service/server.py [--port 8000].

Requests are plain GETs: http://127.0.0.1:8000/<route>?<params>. The flag planted at
start-up is read from service/flag.txt (a dummy one for local testing).
"""
import argparse
import http.server
import os
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import app  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, default=8000)
    args = ap.parse_args()
    with open(os.path.join(HERE, "flag.txt"), encoding="utf-8") as fh:
        flag = fh.read().strip()
    data = os.path.join(HERE, "data")
    state = app.make_state(data, flag)
    os.chdir(data)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            params = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
            status, body = app.handle(state, url.path, params)
            raw = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening on http://127.0.0.1:{args.port}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
'''


@dataclass
class Build:
    """One generated service and everything both modes need.

    ``attacks`` are ``(path, params, marker)``: the marker ("FLAG" for the planted flag, or a
    literal the vulnerable service computes) must come back from the vulnerable service and
    not from the fixed one. ``extra_check`` is host-side test source defining
    ``extra_requests(ctx) -> [(path, params)]`` and ``extra_check(ctx, answers)`` (``ctx``:
    ``flag``, ``env``, ``wordlist``, ``nonce``; ``answers``: ``[(status, body)]``); it sees
    only data, never the service."""

    service: dict[str, str]  # vulnerable service files, relative to service/
    fixed: dict[str, str]  # the same files after the fix (only those that change)
    data: dict[str, str] = field(  # files under service/data/ (the service's working folder)
        default_factory=lambda: {"README.txt": "Working folder of the service.\n"})
    hidden_data: dict[str, str] = field(default_factory=dict)  # data only the tests plant
    extra: dict[str, str] = field(default_factory=dict)  # workspace-root files (wordlists)
    exploit: str = ""  # the oracle's exploit.py (reads TARGET)
    attacks: list[tuple[str, dict[str, str], str]] = field(default_factory=list)
    legit: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # keys only matter: values are redrawn
    forbidden: list[str] = field(default_factory=list)  # text the fixed workspace must not hold
    extra_check: str = ""
    hardened_doc: str = "The hardening is in place"  # test_hardened's docstring
    legacy_test: str = ""  # a visible test that requires the vulnerable behaviour
    what: str = ""  # where the vulnerability is, for the fix instruction
    hint: str = ""  # where the flag lives, for the reproduce instruction
    sites: int = 1  # vulnerable code sites to fix
    # files overriding the fixed service for the infeasible *reproduce* twin, when the fixed
    # service alone would still be attackable (a weak password behind a strong hash)
    safe: dict[str, str] = field(default_factory=dict)


_DRIVER = """
import json, sys
ns = {"__name__": "__ceiling__"}
exec(compile(PROBE, "<probe>", "exec"), ns)
tag, jobs = json.load(sys.stdin)
out = [ns["serve"](data, env, flag, reqs, svc) for svc, data, env, flag, reqs in jobs]
sys.stdout.write("\\n" + tag + json.dumps(out) + "\\n")
"""


@dataclass
class Job:
    """One probe run: ``service`` files answer ``requests`` on a fresh copy of ``data``."""

    service: Mapping[str, str]
    data: Mapping[str, str]
    requests: Sequence[tuple[str, Mapping[str, str]]]
    flag: str = TEST_FLAG
    env: Mapping[str, str] = field(default_factory=dict)


def probe(jobs: Sequence[Job]) -> list[list[tuple[int, str]]]:
    """Each job's answers, ``[(status, body)]`` per request, in one separate interpreter.

    Runs the hidden tests' own :data:`~._harness.PROBE` (the same code the subject runs at
    grading), isolated (``-I``) so that nothing the services do (chdir, environment,
    imports) touches the calling process."""
    with tempfile.TemporaryDirectory(prefix="ceiling-svc-") as tmp:
        payload = []
        for i, job in enumerate(jobs):
            svc = os.path.join(tmp, f"ws{i}", "service")
            os.makedirs(svc)
            for rel, text in job.service.items():
                os.makedirs(os.path.dirname(os.path.join(svc, rel)), exist_ok=True)
                with open(os.path.join(svc, rel), "w", encoding="utf-8") as fh:
                    fh.write(text)
            payload.append([svc, dict(job.data), dict(job.env), job.flag,
                            [[p, dict(q)] for p, q in job.requests]])
        run_env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
        tag = f"ceiling-probe-{secrets.token_hex(8)}:"
        proc = subprocess.run([sys.executable, "-I", "-c", f"PROBE = {PROBE!r}\n" + _DRIVER],
                              cwd=tmp, env=run_env, input=json.dumps([tag, payload]),
                              capture_output=True, text=True, timeout=180, check=False)
        # the answer is the tagged line: what the services print to stdout is not parsed
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(tag)]
        if proc.returncode != 0 or len(lines) != 1:
            raise RuntimeError(f"service probe failed: {proc.stderr.strip()[-500:]}")
        res = json.loads(lines[0][len(tag):])
        return [[(int(st), str(body)) for st, body in r] for r in res]
