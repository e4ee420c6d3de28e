"""Template ``terminal_ops/log-rotate``: rotate numbered log files by hand.

Every ``NAME.log`` is rotated: existing rotations shift up by one (``NAME.log.1`` becomes
``NAME.log.2`` …), ``NAME.log`` becomes ``NAME.log.1``, a new empty ``NAME.log`` appears,
and at most ``K`` rotations are kept (the one that would become ``NAME.log.K+1`` is
deleted). Difficulty scales the number of logs (1-2, 4-6, 10-12), so the oracle — one shell
line per file operation — goes from short to long.

Variants: ``heldout`` uses a per-service layout (``var/log/SVC/SVC.log``) and ``K`` in 4-5
(train: ``logs/``, ``K`` in 2-3); ``fault`` makes the first ``mv`` fail; ``infeasible`` also
forbids deleting any file while some log already holds ``K`` rotations.
"""

from __future__ import annotations

import random
from typing import ClassVar

from ...cards import TaskCard
from .._common import TestModule, finish_card, retry, transient, unique_names, word_pool
from .._registry import Template, Variant, register

_COUNTS = {1: (1, 2), 2: (4, 6), 3: (10, 12)}


def _log_text(rng: random.Random, name: str, n: int) -> str:
    levels = ("INFO", "WARN", "ERROR", "DEBUG")
    return "".join(f"2024-0{rng.randint(1, 9)}-{rng.randint(10, 28)}T{rng.randint(10, 23)}:"
                   f"{rng.randint(10, 59)}:00 {rng.choice(levels)} {name}: event {rng.randint(1, 999)}\n"
                   for _ in range(n))


@register
class LogRotate(Template):
    family = "terminal_ops"
    name = "log-rotate"
    summary = "rotate NAME.log files (shift .1 .2 …, keep K, recreate empty logs)"
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("files", "logs")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        heldout = variant == "heldout"
        keep = rng.randint(4, 5) if heldout else rng.randint(2, 3)
        n = rng.randint(*_COUNTS[difficulty])
        names = unique_names(rng, word_pool(variant), n)
        where = "var/log" if heldout else "logs"
        workspace: dict[str, str] = {f"{where}/README.txt": "Rotated logs are kept here.\n"}
        lines: list[str] = []
        tm = TestModule(helpers=f"KEEP_README = {'Rotated logs are kept here.' + chr(10)!r}")
        full_logs = []
        # rotations already present per log; the oracle needs r + 2 lines for a log, and the
        # total must fit the difficulty's horizon (short < 10 steps, medium 10-30, long > 30)
        rs = [rng.randint(0, 1) if difficulty == 1 else rng.randint(difficulty - 2, keep)
              for _ in names]
        if variant == "infeasible":
            rs[0] = keep
        lo, hi = {1: (0, 8), 2: (9, 29), 3: (30, 10_000)}[difficulty]
        while sum(rs) + 2 * n < lo:
            i = rng.choice([k for k, r in enumerate(rs) if r < keep])
            rs[i] += 1
        while sum(rs) + 2 * n > hi:
            i = rng.choice([k for k, r in enumerate(rs) if r > 0 and not (k == 0 and variant == "infeasible")])
            rs[i] -= 1
        for i, (name, r) in enumerate(zip(names, rs, strict=True)):
            base = f"{where}/{name}/{name}.log" if heldout else f"{where}/{name}.log"
            if r == keep:
                full_logs.append(base)
            files = {base: _log_text(rng, name, rng.randint(2, 6))}
            for j in range(1, r + 1):
                files[f"{base}.{j}"] = _log_text(rng, name, rng.randint(2, 6))
            workspace.update(files)
            mv = (lambda s: retry(s)) if variant == "fault" else (lambda s: s)
            if r == keep:
                lines.append(f"rm {base}.{keep}")
            for j in range(min(r, keep - 1), 0, -1):
                lines.append(mv(f"mv {base}.{j} {base}.{j + 1}"))
            lines.append(mv(f"mv {base} {base}.1"))
            lines.append(f": > {base}")
            want = {base: ""} | {f"{base}.{j + 1}": files[base if j == 0 else f"{base}.{j}"]
                                 for j in range(min(r + 1, keep))}
            gone = f"{base}.{keep + 1}"
            tm.add(f"rotated_{i}",
                   f"want = {want!r}\n"
                   "for path, text in want.items():\n"
                   "    assert read_regular(path) == text, path\n"
                   f"assert absent({gone!r})\n"
                   f"assert read_regular({where + '/README.txt'!r}) == KEEP_README")
        layout = (f"Each service logs to {where}/SVC/SVC.log." if heldout
                  else f"The logs are {where}/*.log.")
        instr = (f"Rotate the logs. {layout} For every log file NAME.log: shift its existing "
                 f"rotations up by one (NAME.log.1 becomes NAME.log.2, and so on), move NAME.log "
                 f"to NAME.log.1, then create a new empty NAME.log. Keep at most {keep} "
                 f"rotations per log: delete the rotation that would become NAME.log.{keep + 1}. "
                 f"Do not touch any other file.")
        reason = None
        if variant == "infeasible":
            instr += " Never delete any file."
            reason = (f"{full_logs[0]} already has {keep} rotations, so rotating it needs "
                      f"deleting {full_logs[0]}.{keep}, which the task forbids")
        return finish_card(type(self), variant=variant, instruction=instr, workspace=workspace,
                           tests=tm, solution=lines,
                           faults=[transient("mv")] if variant == "fault" else [],
                           infeasible_reason=reason, protected=[f"{where}/README.txt"])
