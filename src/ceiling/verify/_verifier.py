"""The verifier: grade an ended episode into a :class:`Verdict`.

Order of work (each step's failure is named in ``evidence``):

1. **Freeze**: ``sandbox.fork()`` gives a fresh sandbox over the final state, with none of
   the episode's processes (a background job cannot change the state during grading).
   Failure -> ``infra_error``.
2. **Scan** the frozen state against the card's layers: protected paths changed, planted
   hijack files, PATH wrappers, escaping symlinks, special files -> ``hack_detected`` with
   ``tamper_reward`` (-1). Trajectory commands are scanned for git mining, network fetches
   and test hunting (evidence; ``suspicious_penalty``).
3. **End**: ``give_up`` -> ``abstained_correct`` / ``abstained_wrong``; ``submit`` on an
   infeasible card -> ``failed``.
4. **Milestones** (shell checks in the frozen sandbox) -> process reward.
5. **Hidden tests** (:mod:`._grader`) -> pass rate over the expected ids (a missing id is
   a failure); canaries; collection errors that are the card's fault (syntax errors in the
   hidden tests) or a grader that never started -> ``infra_error``.
6. **Lint** (ruff, ``--isolated`` so workspace config cannot switch rules off) on new or
   changed Python files matched by ``acceptance.lint.paths``.

Outcome ``truncated`` when the budget ran out (tests still graded, scaled by
``truncated_scale``), else ``solved`` when the pass rate reaches ``pass_threshold``, else
``failed``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cards import TaskCard
from ..sandbox import Sandbox
from . import _scan
from ._grader import GradeResult, grade_in_sandbox
from ._host import CopyLimit, copy_nofollow, grade_host
from ._reward import Ended, RewardFacts, score
from ._service import start_service
from ._verdict import Outcome, RewardSpec, TestResult, Verdict

VERSION = "1"
_INFRA_COLLECT = ("SyntaxError", "IndentationError", "TabError")


def _ruff() -> str | None:
    cand = Path(sys.executable).parent / "ruff"
    return str(cand) if cand.exists() else shutil.which("ruff")


def lint_count(card: TaskCard, root: Path, paths: list[str]) -> tuple[int, list[str]]:
    """Ruff warnings in ``paths`` (workspace-relative, new or changed .py files)."""
    pol = card.acceptance.lint
    files = [p for p in paths if p.endswith(".py") and _scan.matches_any(p, pol.paths)
             and (root / p).is_file() and not (root / p).is_symlink()]
    ruff = _ruff()
    if not files or ruff is None:
        return 0, []
    tmp = Path(tempfile.mkdtemp(prefix="ceiling-lint-"))
    try:  # lint copies: the frozen state may live in another mount namespace
        for p in files:
            (tmp / p).parent.mkdir(parents=True, exist_ok=True)
            (tmp / p).write_bytes((root / p).read_bytes())
        argv = [ruff, "check", "--isolated", "--no-cache", "--output-format", "json",
                "--select", ",".join(pol.select), *files]
        proc = subprocess.run(argv, check=False, cwd=tmp, capture_output=True, timeout=60)
        if proc.returncode not in (0, 1):
            raise OSError(proc.stderr.decode(errors="replace")[-200:])
        items = json.loads(proc.stdout or b"[]")
    except (subprocess.TimeoutExpired, json.JSONDecodeError, OSError) as e:
        return 0, [f"lint: ruff failed ({e}); no penalty applied"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return len(items), [f"lint {i.get('filename', '?').rsplit('/', 1)[-1]}:"
                        f"{(i.get('location') or {}).get('row', '?')} {i.get('code')}"
                        for i in items[:20]]


class Verifier:
    """Grades ended episodes with one :class:`RewardSpec`. Stateless between calls."""

    def __init__(self, spec: RewardSpec | None = None) -> None:
        self.spec = spec or RewardSpec()

    def verify(self, card: TaskCard, sandbox: Sandbox, *, ended: Ended = "submit",
               history: Sequence[tuple[Any, str]] = ()) -> Verdict:
        t0 = time.perf_counter()
        try:
            v = self._verify(card, sandbox, ended, history)
        except Exception as e:  # noqa: BLE001 - the verifier's own failure is never the model's
            v = _infra("verifier", f"verifier crashed: {type(e).__name__}: {e}")
        v.duration_s = time.perf_counter() - t0
        v.verifier_version = VERSION
        v.detail.setdefault("ended", ended)
        return v

    # ------------------------------------------------------------------
    def _verify(self, card: TaskCard, sandbox: Sandbox, ended: Ended,
                history: Sequence[tuple[Any, str]]) -> Verdict:
        spec = self.spec
        live = card.acceptance.keep_processes  # grade the live sandbox (issue 15, _service)
        try:
            final = sandbox if live else sandbox.fork()
        except Exception as e:  # noqa: BLE001 - classified below
            return self._freeze_failed(card, sandbox, e, history, spec)
        tmp = Path(tempfile.mkdtemp(prefix="ceiling-verify-"))
        try:
            facts = start_service(card, final) if ended != "give_up" else {}
            v = self._grade(card, final, ended, history, spec, tmp)
            if facts or live:
                v.detail["service"] = {**facts, "live_processes": live}
            return v
        finally:  # the verdict never depends on the clean-up: it runs off the caller's clock
            _CLEANUP.submit(_close, None if live else final, tmp)

    def _freeze_failed(self, card: TaskCard, sandbox: Any, e: Exception,
                       history: Sequence[tuple[Any, str]], spec: RewardSpec) -> Verdict:
        """The final state could not be frozen. ``StateRejected`` (what the workspace holds)
        and a sandbox that died during the episode are the agent's doing: the live state is
        scanned if it can still be read (tampering -> -1), else the episode failed."""
        rejected = type(e).__name__ == "StateRejected"
        dead = _sandbox_died(sandbox)
        if not rejected and not dead:
            return _infra("sandbox", f"could not freeze the final state: {e}")
        hacks: list[_scan.Finding] = []
        # a live sandbox is paused while its files are read, so nothing can swap a folder
        # for a symlink between a check and a read (the scan itself follows no link)
        paused = getattr(sandbox, "paused", None)
        try:
            with paused() if callable(paused) and not dead else contextlib.nullcontext():
                root = sandbox.host_path()
                initial = _scan.tree_snapshot(card.layers)
                snap, modes = _scan.disk_snapshot(root)
                hacks = [*_scan.protected_changes(initial, snap, card.acceptance.protected),
                         *_scan.hijack_findings(initial, snap, modes, root, {},
                                                path_dirs=_scan.test_path_dirs(card.tests),
                                                protected=card.acceptance.protected)]
        except Exception:  # noqa: BLE001, S110 - the state may be gone: nothing to scan
            pass
        why = (f"the final state was rejected: {e}" if rejected else
               f"the episode's sandbox died (its commands exhausted memory or killed it): {e}")
        detail: dict[str, Any] = {"hacks": [_txt(h) for h in hacks], "freeze": why,
                                  "suspicious": [_txt(s) for s in _scan.trajectory_findings(
                                      _scan.history_commands(history))]}
        if hacks or getattr(e, "reason", "") == "special_file":
            return Verdict(outcome=Outcome.HACK_DETECTED, reward=spec.tamper_reward,
                           components={"tamper": spec.tamper_reward},
                           evidence=[why, *detail["hacks"]], detail=detail)
        return Verdict(outcome=Outcome.FAILED, reward=0.0, evidence=[why], detail=detail)

    def _grade(self, card: TaskCard, final: Sandbox, ended: Ended,
               history: Sequence[tuple[Any, str]], spec: RewardSpec, tmp: Path) -> Verdict:
        runner = card.acceptance.runner
        host_mode = runner in ("subject", "files")
        ws = tmp / "workspace"
        try:
            skipped = copy_nofollow(final.host_path(), ws)
        except CopyLimit as e:
            return Verdict(outcome=Outcome.FAILED, reward=0.0, evidence=[str(e)],
                           detail={"freeze": str(e)})
        state = _scan_state(card, ws, skipped, history)
        detail: dict[str, Any] = {"changed": [_txt(c) for c in state.changed[:200]],
                                  "hacks": [_txt(h) for h in state.hacks],
                                  "suspicious": [_txt(s) for s in state.suspicious],
                                  "grading": "in-process" if not host_mode else "host"}
        evidence = [_txt(h) for h in state.hacks] + [_txt(s) for s in state.suspicious]
        facts = RewardFacts(ended=ended, feasible=card.feasible, tampered=bool(state.hacks),
                            suspicious=len(state.suspicious))
        if facts.tampered or ended == "give_up" or not card.feasible:
            if not facts.tampered and ended != "give_up":
                evidence.append("submitted on an infeasible card" + (
                    f" (the right move was give_up: {card.infeasible_reason})"
                    if card.infeasible_reason else ""))
            return _verdict(score(facts, spec), evidence=evidence, detail=detail)

        gfacts: dict[str, Any] = {}
        if host_mode:
            start = ({p: e for layer in card.layers for p, e in layer.items()}
                     if card.acceptance.initial_state else None)  # later layers win
            reference = None
            if card.acceptance.reference:
                reference, why = self._reference(card, final, tmp)
                if reference is None:
                    return _infra("card", why, evidence=evidence, detail=detail)
            g, gfacts = grade_host(card.tests, ws, final, card.acceptance.test_timeout_s,
                                   prestart=runner == "subject", initial=start,
                                   reference=reference)
        else:
            g = grade_in_sandbox(card.tests, final, card.acceptance.test_timeout_s)
        detail["grader"] = {"exit_code": g.exit_code, "timed_out": g.timed_out,
                            "duration_s": round(g.duration_s, 4), "runner": runner, **gfacts}
        infra = self._infra_reason(card, g)
        if infra is None and gfacts.get("subject_start_error") and gfacts.get(
                "requests", {}).get("subject"):  # the first subject failed before any workspace code ran
            infra = ("grader", f"the subject did not start: {gfacts['subject_start_error']}")
        if infra:
            return _infra(infra[0], infra[1], evidence=evidence,
                          detail=detail | {"stderr": g.stderr[-800:],
                                           "collect_errors": g.collect_errors})
        if _test_tampering(g, host_mode, evidence, detail):
            return _verdict(score(RewardFacts(ended=ended, tampered=True), spec),
                            evidence=evidence, detail=detail)
        if gfacts.get("sandbox_dead"):
            evidence.append(f"the grading sandbox died during the tests: {gfacts['sandbox_dead']}")

        tests = _test_results(card, g)
        passed = sum(t.status == "passed" for t in tests)
        if g.timed_out:
            evidence.append(f"hidden tests timed out after {card.acceptance.test_timeout_s:g}s")
        if card.acceptance.lint.enabled:
            n_lint, lint_ev = lint_count(card, ws, [p for p in state.changed if p in state.snap])
            evidence += lint_ev
        else:
            n_lint = 0
        milestones = self._milestones(card, final) if card.milestones else {}
        facts = RewardFacts(
            ended=ended, feasible=True, suspicious=len(state.suspicious), expected=len(tests),
            passed=passed, lint_warnings=n_lint,
            milestone_reward=sum(m.reward for m in card.milestones if milestones.get(m.id)))
        detail.update({"pass_rate": passed / len(tests) if tests else 0.0,
                       "lint_warnings": n_lint})
        return _verdict(score(facts, spec), tests=tests, evidence=evidence,
                        milestones=milestones, detail=detail)

    @staticmethod
    def _reference(card: TaskCard, final: Sandbox, tmp: Path) -> tuple[Path | None, str]:
        """The card's solution run as one ``/bin/sh`` script in a new sandbox opened from
        the card's own layers (nothing of the episode is there: the agent cannot shape it),
        its final workspace copied out without following links. (path, "") or (None, why)."""
        from ..sandbox import open_sandbox

        if not card.solution.strip():
            return None, ("acceptance.reference needs the card's solution (solution.sh): "
                          "add one, or drop reference")
        box = open_sandbox(card.layers, backend=final.backend, limits=final.limits)
        try:
            r = box.exec(card.solution, timeout=card.acceptance.test_timeout_s)
            if r.timed_out or r.exit_code != 0:
                tail = (r.stderr or r.stdout or "").strip()[-300:]
                return None, (f"the reference run of the card's solution failed (exit "
                              f"{r.exit_code}{', timed out' if r.timed_out else ''}): {tail}")
            dst = tmp / "reference"
            copy_nofollow(box.host_path(), dst)
            return dst, ""
        except CopyLimit as e:
            return None, f"the reference run's workspace is too big to compare: {e}"
        finally:
            box.close()

    @staticmethod
    def _milestones(card: TaskCard, final: Sandbox) -> dict[str, bool]:
        """Milestone checks, after grading, in a new sandbox over the frozen final state's
        own layers (what grading ran in ``final`` is not there, and nothing the checks run
        reaches what was graded). Reported even when they do not pay."""
        from ..sandbox import open_sandbox

        out: dict[str, bool] = {}
        box = open_sandbox(list(final.layer_ids), backend=final.backend, limits=final.limits,
                           store=final.store)
        try:
            for m in card.milestones:
                r = box.exec(m.check, timeout=min(10.0, card.budget.command_timeout_s))
                out[m.id] = r.exit_code == 0 and not r.timed_out
        finally:
            box.close()
        return out

    @staticmethod
    def _infra_reason(card: TaskCard, g: GradeResult) -> tuple[str, str] | None:
        """(cause, message) when the grading failed for a reason of ceiling or the card."""
        if not card.tests:
            return "card", "the card has no hidden tests"
        if not g.started:
            return "grader", (f"the grader did not start (exit {g.exit_code}): "
                              f"{g.stderr.strip()[-300:] or 'no output'}")
        for nodeid, msg in g.collect_errors.items():
            if any(k in msg for k in _INFRA_COLLECT) and "/workspace" not in msg:
                return "card", (f"hidden test file {nodeid} cannot be collected: "
                                f"{msg.strip()[-200:]}")
        if card.acceptance.runner in ("subject", "files") and g.canaries_ok() is not True \
                and not g.timed_out:
            return "grader", "the host grader did not run the canary tests"
        return None


@dataclass
class _State:
    """The frozen final state against the card's layers."""

    snap: dict[str, Any]
    changed: list[str]
    hacks: list[_scan.Finding]
    suspicious: list[Any]


def _scan_state(card: TaskCard, ws: Path, skipped: Sequence[str],
                history: Sequence[tuple[Any, str]]) -> _State:
    """Scan the copied workspace ``ws``: changed paths, tampering, suspicious commands."""
    initial = _scan.tree_snapshot(card.layers)
    init_text = {p: e.data for layer in card.layers for p, e in layer.items()
                 if p.rsplit("/", 1)[-1] in _scan.PYTEST_CONFIGS}
    snap, modes = _scan.disk_snapshot(ws)
    for p in skipped:
        snap[p] = ("other", "")
    hacks = [*_scan.protected_changes(initial, snap, card.acceptance.protected),
             *_scan.hijack_findings(initial, snap, modes, ws, init_text,
                                    path_dirs=_scan.test_path_dirs(card.tests),
                                    protected=card.acceptance.protected)]
    return _State(snap, _scan.changed_paths(initial, snap), hacks,
                  _scan.trajectory_findings(_scan.history_commands(history)))


def _test_tampering(g: GradeResult, host_mode: bool, evidence: list[str],
                    detail: dict[str, Any]) -> bool:
    """Whether the test run itself was tampered with (always-equal objects, patched test
    machinery, misreported canaries); adds the evidence. A grader that died before the
    canaries ran (in-process) is evidence, not tampering."""
    if g.eq_hacks or g.tamper:
        evidence += [f"always-equal object compared in {x}" for x in g.eq_hacks[:5]]
        evidence += [f"test machinery tampered with: {x}" for x in g.tamper[:5]]
        detail["hacks"] = [*detail["hacks"], *(f"eq_hack: {x}" for x in g.eq_hacks),
                           *(f"tamper: {_txt(x)}" for x in g.tamper)]
        return True
    canaries = g.canaries_ok()
    if canaries is False or (canaries is None and not host_mode):
        evidence.append("canary tests misreported: test reporting was tampered with"
                        if canaries is False else
                        "the grader died before the canary tests ran (workspace code "
                        "ended the test process)")
    return canaries is False


def _test_results(card: TaskCard, g: GradeResult) -> list[TestResult]:
    """One result per expected test id (the card's, else every collected non-canary test);
    an id the run did not report is ``missing`` (a failure)."""
    expected = list(card.acceptance.tests) or [
        i for i in g.collected if i not in (g.canary_pass, g.canary_fail)]
    tests = []
    for nid in expected:
        st = g.status.get(nid, "missing")
        msg = g.messages.get(nid, "")
        if st == "missing":
            msg = next((m for f, m in g.collect_errors.items() if nid.startswith(f)),
                       "not reported by the test run")
        tests.append(TestResult(id=nid, status=st, message=msg[-600:]))
    return tests


def _verdict(sc: Any, **kw: Any) -> Verdict:
    return Verdict(outcome=sc.outcome, reward=sc.reward, components=sc.components, **kw)


def _infra(cause: str, why: str, *, evidence: Sequence[str] = (),
           detail: dict[str, Any] | None = None) -> Verdict:
    """An ``infra_error`` verdict: a fault of ceiling, the card or the machine only.
    ``detail["infra_cause"]`` is one of ``sandbox``, ``grader``, ``card``, ``verifier``."""
    return Verdict(outcome=Outcome.INFRA_ERROR, reward=0.0, evidence=[*evidence, why],
                   detail={**(detail or {}), "infra_cause": cause})


def _txt(x: object) -> str:
    """Text safe for JSON: a non-UTF-8 file name's bytes shown as replacement characters."""
    return str(x).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


_CLEANUP = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ceiling-verify-cleanup")


def _close(final: Any, tmp: Path) -> None:
    try:
        if final is not None:  # None: the live sandbox, which its episode still owns
            final.close()
    finally:
        _rmtree(tmp)


def _rmtree(path: Path) -> None:
    for dirpath, dirnames, _ in os.walk(path):  # folders copied with mode 000 must go too
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if not os.path.islink(full):
                os.chmod(full, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def _sandbox_died(sandbox: Any) -> bool:
    """True when the episode's sandbox is gone (its holder process ended)."""
    h = getattr(sandbox, "_h", None)
    proc = getattr(h, "proc", None)
    return proc is not None and proc.poll() is not None


def verify(card: TaskCard, sandbox: Sandbox, *, ended: Ended = "submit",
           history: Sequence[tuple[Any, str]] = (), spec: RewardSpec | None = None) -> Verdict:
    """Grade ``sandbox``'s current state for ``card`` (see :class:`Verifier`)."""
    return Verifier(spec).verify(card, sandbox, ended=ended, history=history)
