"""``VulnTemplate``: one vulnerability kind, in mode *fix* or *reproduce*, as a template.

Each kind registers two templates (``security_audit/<kind>-fix-v1`` and
``security_audit/<kind>-reproduce-v1``) from one builder, ``build(rng, difficulty,
heldout) -> Build`` (see ``_service.Build``). Variants:

- ``heldout``: the builder's structural variant (another injection context, a filter to
  bypass, the secret kept elsewhere...), never produced for train;
- ``fault``: a transient ``python3`` failure, no permission on ``service/app.py``, or a
  missing ``curl``/``sed``/``grep``/... — the oracle retries, ``chmod``s, and uses only
  ``python3``;
- ``infeasible`` (*fix*): a protected visible test requires the vulnerable behaviour, so
  the exploit cannot be closed without breaking it; (*reproduce*): the service is already
  safe, so no exploit exists.

Before a card is returned the generator checks, by running both services in-process, that
the attacks leak on the vulnerable service and not on the fixed one, and that every
functional request gets the same answer from both.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, ClassVar

from ...cards import Fault, TaskCard
from .._registry import Template, Variant
from ..repo_refactor import _kit
from ._harness import fix_test, reproduce_test
from ._service import DUMMY_FLAG, SERVER, TEST_FLAG, Build, Job, probe

Builder = Callable[[random.Random, int, bool], Build]
EXPLOIT_TIMEOUT_S = 60
RUNNER = "subject"  # hidden tests talk to the workspace only through the subject API


def _validate(tid: str, b: Build, fixed: dict[str, str]) -> list[tuple[int, str]]:
    """Check that the card discriminates; return the legitimate requests' answers.

    Runs the hidden tests' probe over the vulnerable and the fixed service: every attack
    marker leaks from the vulnerable one only; the fixed service answers every legitimate
    request exactly like the vulnerable one, before and after the attacks, and whatever the
    flag and the environment credentials (they are redrawn at grading); the extra check
    passes on the fixed service and fails on the vulnerable one. The requests go in the
    order the hidden tests send them: legitimate, extra, attacks, legitimate again."""
    legit = list(b.legit)
    attacks = [(p, q) for p, q, _ in b.attacks]
    data = {**b.data, **b.hidden_data}
    other_env = {k: f"env-other-{i}" for i, k in enumerate(sorted(b.env))}
    ctx = {"flag": TEST_FLAG, "env": dict(b.env), "nonce": "c0ffee",
           "wordlist": b.data.get("wordlist.txt", "").split()}
    ns: dict[str, Any] = {}
    if b.extra_check:
        exec(compile(b.extra_check, f"<{tid} extra_check>", "exec"), ns)  # noqa: S102 - ours
    extra = ns["extra_requests"](ctx) if ns else []
    seq = legit + extra + attacks + legit
    vuln_res, fixed_res, other_res = probe([
        Job(b.service, data, seq, env=b.env), Job(fixed, data, seq, env=b.env),
        Job(fixed, data, legit, flag="FLAG{another-probe-1111}", env=other_env)])
    n, k = len(legit), len(extra)
    want = vuln_res[:n]
    if not (want == fixed_res[:n] == fixed_res[-n:] == other_res):
        raise RuntimeError(f"{tid}: the fix changes legitimate answers (or they depend on "
                           "the flag, the environment or an earlier attack)")
    for (_, _, marker), (_, vb), (_, fb) in zip(b.attacks, vuln_res[n + k:], fixed_res[n + k:]):
        m = TEST_FLAG if marker == "FLAG" else marker
        if m not in vb or m in fb:
            raise RuntimeError(f"{tid}: attack check is not discriminating ({marker!r})")
    if ns:
        ns["extra_check"](ctx, fixed_res[n:n + k])
        try:
            ns["extra_check"](ctx, vuln_res[n:n + k])
        except AssertionError:
            pass
        else:
            raise RuntimeError(f"{tid}: the extra check passes on the vulnerable service")
    return want


def _visible_tests(b: Build, legit_results: list[tuple[int, str]]) -> str:
    lines = ['"""Functional tests of the service. Run: python3 -m pytest -q tests"""',
             "import os", "import pathlib", "import shutil", "import sys", "",
             'SERVICE = pathlib.Path(__file__).resolve().parents[1] / "service"',
             "sys.path.insert(0, str(SERVICE))", f"os.environ.update({b.env!r})", "",
             "import app  # noqa: E402", "", "",
             "def _state(tmp_path):",
             '    data = tmp_path / "data"',
             '    shutil.copytree(SERVICE / "data", data)',
             f"    return app.make_state(str(data), {DUMMY_FLAG!r})"]
    # the visible tests show every other functional request; the hidden tests check all
    for i, ((path, params), res) in enumerate(zip(b.legit[::2], legit_results[::2])):
        name = path.strip("/").replace("/", "_").replace("-", "_") or "root"
        lines += ["", "", f"def test_{name}_{i}(tmp_path):",
                  f"    assert app.handle(_state(tmp_path), {path!r}, {params!r}) == {res!r}"]
    return "\n".join(lines) + "\n" + b.legacy_test


class VulnTemplate(Template):
    family = "security_audit"
    difficulties = (1, 2)
    horizons = {1: "short", 2: "medium"}  # noqa: RUF012
    mode: ClassVar[str] = "fix"
    kind: ClassVar[str] = ""
    builder: ClassVar[Builder]

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        b = type(self).builder(rng, difficulty, variant == "heldout")
        fixed = {**b.service, **b.fixed}
        legit_res = _validate(self.template_id(), b, fixed)
        ws = {f"service/{k}": v for k, v in b.service.items()}
        ws.update({"service/server.py": SERVER, "service/flag.txt": DUMMY_FLAG + "\n"})
        ws.update({f"service/data/{k}": v for k, v in b.data.items()})
        ws.update(b.extra)
        fault, chmod = _kit.fault_for(rng, variant, "service/app.py")
        if fault is not None and fault.kind == "missing_tool":
            fault.target = rng.choice(("curl", "sed", "grep", "wget"))
        infeasible = variant == "infeasible"
        if self.mode == "fix":
            return self._fix(b, ws, legit_res, difficulty, variant, fault, chmod, infeasible)
        return self._reproduce(b, ws, fixed, difficulty, variant, fault, chmod, infeasible)

    def _fix(self, b: Build, ws: dict[str, str], legit_res: list[tuple[int, str]],
             difficulty: int, variant: str, fault: Fault | None, chmod: list[str],
             infeasible: bool) -> TaskCard:
        tname = "tests/test_service.py"
        ws[tname] = _visible_tests(b, legit_res)
        if not infeasible:
            ws[tname] = ws[tname].replace(b.legacy_test, "") if b.legacy_test else ws[tname]
        hidden = fix_test(
            data={**b.data, **b.hidden_data}, env_keys=sorted(b.env), attacks=b.attacks,
            legit=[(p, q, r) for (p, q), r in zip(b.legit, legit_res)],
            forbidden=b.forbidden, wordlist=b.data.get("wordlist.txt", "").split(),
            extra_check=b.extra_check, hardened_doc=b.hardened_doc)
        sites = "the vulnerability" if b.sites == 1 else f"all {b.sites} vulnerable places"
        instruction = (
            f"Security audit of the small service in `service/` (logic in `service/app.py`; "
            f"`python3 service/server.py --port 8000 &` serves it on loopback). {b.what} Fix "
            f"{sites} so the attack no longer works, while every legitimate request keeps "
            f"the exact same response: the functional tests in `{tname}` must keep passing "
            f"(do not edit them). Submit when done.")
        return _kit.assemble(
            self, difficulty=difficulty, variant=variant, instruction=instruction,
            workspace=ws, tests={"test_task.py": hidden},
            test_ids=_kit.test_ids("test_task.py", hidden), runner=RUNNER,
            solution=_kit.GIVE_UP if infeasible else _kit.oracle_script(
                {f"service/{k}": v for k, v in b.fixed.items()}, chmod=chmod,
                note=f"fix {self.kind}"),
            protected=[tname], faults=[fault] if fault else [],
            infeasible_reason=("a protected functional test requires the vulnerable behaviour "
                               f"({self.kind}): the hole cannot be closed without breaking it")
            if infeasible else None,
            tags=[f"vuln:{self.kind}", "mode:fix", f"structure:{'heldout' if variant == 'heldout' else 'train'}-{self.kind}"])

    def _reproduce(self, b: Build, ws: dict[str, str], fixed: dict[str, str], difficulty: int,
                   variant: str, fault: Fault | None, chmod: list[str], infeasible: bool) -> TaskCard:
        pristine = {**fixed, **b.safe} if infeasible else b.service
        if infeasible:
            ws.update({f"service/{k}": v for k, v in pristine.items()})
        hidden = reproduce_test(service=pristine, data=b.data, timeout=EXPLOIT_TIMEOUT_S)
        instruction = (
            f"Penetration test. The service in `service/` (logic in `service/app.py`) is "
            f"believed to be vulnerable ({self.kind.replace('-', ' ')}). Start it with "
            f"`python3 service/server.py --port 8000 &` (plain GET requests on loopback). "
            f"{b.hint} Write `exploit.py` in the workspace root: it must attack the service at "
            f"the URL in the environment variable `TARGET` (e.g. http://127.0.0.1:8000), "
            f"retrieve the flag (format `FLAG{{...}}`) through the service and print it. "
            f"`service/flag.txt` holds only a local dummy: your exploit is graded against a "
            f"fresh instance with a different secret flag. If the service turns out not to be "
            f"exploitable, give up and say why.")
        return _kit.assemble(
            self, difficulty=difficulty, variant=variant, instruction=instruction,
            workspace=ws, tests={"test_task.py": hidden},
            test_ids=_kit.test_ids("test_task.py", hidden), runner=RUNNER,
            solution=_kit.GIVE_UP if infeasible else _kit.oracle_script(
                {"exploit.py": b.exploit}, chmod=chmod, note=f"exploit {self.kind}"),
            protected=[], faults=[fault] if fault else [],
            infeasible_reason=("the service is not vulnerable: input never reaches the "
                               f"{self.kind} sink unsafely, so no exploit can retrieve the "
                               "flag") if infeasible else None,
            tags=[f"vuln:{self.kind}", "mode:reproduce",
                  f"structure:{'heldout' if variant == 'heldout' else 'train'}-{self.kind}"])


def register_pair(kind: str, summary: str, builder: Builder) -> None:
    """Register ``<kind>-fix`` and ``<kind>-reproduce`` templates built by ``builder``."""
    from .._registry import register

    for mode in ("fix", "reproduce"):
        cls = type(f"{kind.title().replace('-', '')}{mode.title()}", (VulnTemplate,), {
            "name": f"{kind}-{mode}", "mode": mode, "kind": kind,
            "summary": f"{summary} ({'fix it' if mode == 'fix' else 'write an exploit'})",
            "tags": ("security", kind, mode), "builder": staticmethod(builder),
            "__module__": __name__,
        })
        register(cls)
