"""Template ``terminal_ops/script-repair``: fix broken shell scripts.

Each ``scripts/NAME.sh`` summarises ``data/NAME.csv`` into ``out/NAME.txt`` but carries
injected bugs (a misspelt command, a wrong input path, a missing ``mkdir``, a wrong field
separator, a misspelt variable). The hidden tests (``runner: subject``) run each script in
the grading sandbox through ``subject.run`` (a fresh process as the agent's uid; the tests
themselves stay in the grader and read the result back as data), feed it a *fresh* input it
has never seen and compare its output with the right answer, so hard-coding the output does
not pass. The oracle fixes each bug with one ``sed`` line and runs each
script once; difficulty (1 script with 1-2 bugs; 3-4 scripts with 2-4; 8-9 with 3-4)
sets the horizon.

Variants: ``train`` scripts sum a column over the rows of one region; ``heldout`` scripts
count the distinct values of a column (another pipeline shape) and live in ``bin/``;
``fault`` makes the first ``sed`` fail; ``infeasible`` scripts read an input file that is
missing from the workspace and cannot be recreated.
"""

from __future__ import annotations

import random
from typing import ClassVar

from ...cards import TaskCard
from .._common import TestModule, finish_card, retry, shq, transient, unique_names, word_pool
from .._registry import Template, Variant, register

_SIZES = {1: (1, 1, 1, 2), 2: (3, 4, 2, 4), 3: (8, 9, 3, 4)}  # scripts lo/hi, bugs lo/hi
_REGIONS = ("north", "south", "east", "west")
_BUGS = ("typo_cmd", "bad_path", "no_mkdir", "bad_sep", "bad_var")


_RUN = '''
def run(subject, name, folder, csv):
    """Run folder/name.sh on a fresh data/name.csv in the grading sandbox; its output file."""
    r = subject.run(f"mkdir -p data && cat > data/{name}.csv && rm -rf out && "
                    f"sh {folder}/{name}.sh", input=csv.encode(), timeout=20)
    assert not r.timed_out, f"{folder}/{name}.sh timed out"
    assert subject.exists(f"out/{name}.txt"), f"out/{name}.txt missing: {r.stderr[-300:]}"
    return subject.read(f"out/{name}.txt").decode(errors="replace").strip()
'''


def _script(name: str, folder: str, region: str, distinct: bool) -> str:
    if distinct:
        what = "number of distinct customers (column 3)"
        body = 'cut -d, -f3 "$IN" | sort -u | wc -l > "$OUT"'
    else:
        what = f"total amount (column 4) of the rows whose region (column 2) is {region}"
        body = f'awk -F, \'$2 == "{region}" {{ s += $4 }} END {{ print s + 0 }}\' "$IN" > "$OUT"'
    return (f"#!/bin/sh\n# Write the {what} of data/{name}.csv to out/{name}.txt.\n"
            f"set -e\nIN=data/{name}.csv\nOUT=out/{name}.txt\nmkdir -p out\n{body}\n")


def _rows(rng: random.Random, words: tuple[str, ...], region: str) -> list[tuple[str, str, int]]:
    rows = [(rng.choice(_REGIONS), rng.choice(words), rng.randint(1, 500))
            for _ in range(rng.randint(4, 12))]
    rows.append((region, rng.choice(words), rng.randint(1, 500)))  # at least one match
    rows.append((rng.choice(_REGIONS), rows[0][1], rng.randint(1, 500)))  # a repeat customer
    rng.shuffle(rows)
    return rows


def _answer(rows: list[tuple[str, str, int]], region: str, distinct: bool) -> str:
    if distinct:
        return str(len({r[1] for r in rows}))
    return str(sum(r[2] for r in rows if r[0] == region))


def _csv(rows: list[tuple[str, str, int]]) -> str:
    return "".join(f"{i},{reg},{who},{amt}\n" for i, (reg, who, amt) in enumerate(rows))


@register
class ScriptRepair(Template):
    family = "terminal_ops"
    name = "script-repair"
    summary = "fix injected bugs in shell scripts so they produce the right summaries"
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("scripts", "debugging")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        distinct = variant == "heldout"
        folder = "bin" if distinct else "scripts"
        words = word_pool(variant)
        slo, shi, blo, bhi = _SIZES[difficulty]
        names = unique_names(rng, words, rng.randint(slo, shi), sep="_")
        workspace: dict[str, str] = {}
        lines: list[str] = []
        sed = (lambda s: retry(s)) if variant == "fault" else (lambda s: s)
        tm = TestModule(helpers=_RUN)
        for i, name in enumerate(names):
            region = rng.choice(_REGIONS)
            good = _script(name, folder, region, distinct)
            bugs = rng.sample(_BUGS, rng.randint(blo, bhi))
            bad, fixes = good, []
            cmd = "sort" if distinct else "awk"
            for bug in bugs:
                if bug == "typo_cmd":
                    typo = {"awk": "akw", "sort": "sotr"}[cmd]
                    bad = bad.replace(f"{cmd} -", f"{typo} -", 1) if cmd == "awk" else \
                        bad.replace("| sort -u", f"| {typo} -u", 1)
                    fixes.append(f"s/{typo} -/{cmd} -/")
                elif bug == "bad_path":
                    bad = bad.replace(f"IN=data/{name}.csv", f"IN=dat/{name}.cvs")
                    fixes.append(f"s|^IN=.*|IN=data/{name}.csv|")
                elif bug == "no_mkdir":
                    bad = bad.replace("mkdir -p out\n", "")
                    fixes.append("s|^OUT=.*|&\\nmkdir -p out|")
                elif bug == "bad_sep":
                    bad = bad.replace("-F,", "-F';'") if cmd == "awk" else bad.replace("-d,", "-d';'")
                    fixes.append("s/-F';'/-F,/" if cmd == "awk" else "s/-d';'/-d,/")
                elif bug == "bad_var":
                    bad = bad.replace('"$IN"', '"$INPUT"', 1)
                    fixes.append('s/"$INPUT"/"$IN"/')
            path = f"{folder}/{name}.sh"
            workspace[path] = bad
            rows = _rows(rng, words, region)
            if variant != "infeasible":
                workspace[f"data/{name}.csv"] = _csv(rows)
            lines.extend(sed(f"sed -i {shq(fx)} {path}") for fx in fixes)
            lines.append(f"sh {path}")
            hidden = _rows(rng, words, region)
            if variant == "infeasible":
                # the scripts' real input is gone; only its result could pass
                tm.add(f"script_{i}", f"assert read_regular('out/{name}.txt').strip()"
                                      f" == {_answer(rows, region, distinct)!r}")
            else:
                tm.add(f"script_{i}", f"assert run(subject, {name!r}, {folder!r}, "
                                      f"{_csv(hidden)!r}) == {_answer(hidden, region, distinct)!r}",
                       subject=True)
        instr = (f"The shell scripts in {folder}/ are broken: each {folder}/NAME.sh should write "
                 f"a summary of data/NAME.csv to out/NAME.txt, as its comment says. Fix them so "
                 f"that `sh {folder}/NAME.sh` works for any input file, then run each once.")
        return finish_card(
            type(self), variant=variant, instruction=instr, workspace=workspace, tests=tm,
            solution=lines, faults=[transient("sed")] if variant == "fault" else [],
            infeasible_reason="the scripts' input files data/*.csv are missing and cannot be "
                              "recreated, so their summaries cannot be produced",
            runner="subject")
