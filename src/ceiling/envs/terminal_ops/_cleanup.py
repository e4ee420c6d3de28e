"""Template ``terminal_ops/cleanup-except``: delete junk files, except those on a keep list.

``cache/`` holds folders of files; every file matching the junk patterns must go, except the
ones listed in ``cache/KEEP`` (paths relative to ``cache/``); everything else stays. The
oracle removes one file per line, so difficulty (3-6, 12-22, 32-40 junk files) moves the
horizon from short to long.

Variants: ``train`` junk is ``*.tmp`` / ``*.bak`` one folder deep; ``heldout`` junk is
``core.*`` / ``*~`` two folders deep (a pattern and layout train never uses); ``fault``
makes the first ``rm`` fail; ``infeasible`` refers to ``cache/KEEP`` but it is missing, so
nobody can tell which junk files must stay.
"""

from __future__ import annotations

import random
from typing import ClassVar

from ...cards import TaskCard
from .._common import TestModule, finish_card, retry, transient, unique_names, word_pool
from .._registry import Template, Variant, register

_JUNK = {1: (3, 6), 2: (12, 22), 3: (32, 40)}


@register
class CleanupExcept(Template):
    family = "terminal_ops"
    name = "cleanup-except"
    summary = "delete junk files by pattern, except those listed in a keep file"
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("files", "cleanup")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        heldout = variant == "heldout"
        words = word_pool(variant)
        n_junk = rng.randint(*_JUNK[difficulty])
        n_keep = rng.randint(1, 3)
        n_other = rng.randint(2, 5)
        dirs = unique_names(rng, words, rng.randint(2, 4))
        if heldout:
            dirs = [f"{d}/{rng.choice(words)}" for d in dirs]
        stems = unique_names(rng, words, n_junk + n_keep + n_other, sep="_")

        def junk_name(stem: str) -> str:
            if heldout:
                return f"core.{stem}" if rng.random() < 0.5 else f"{stem}.txt~"
            return f"{stem}.{rng.choice(('tmp', 'bak'))}"

        def other_name(stem: str) -> str:
            return f"{stem}.{rng.choice(('txt', 'cfg', 'csv', 'md'))}"

        junk = [f"{rng.choice(dirs)}/{junk_name(s)}" for s in stems[:n_junk]]
        kept = [f"{rng.choice(dirs)}/{junk_name(s)}" for s in stems[n_junk:n_junk + n_keep]]
        other = [f"{rng.choice(dirs)}/{other_name(s)}" for s in stems[n_junk + n_keep:]]
        workspace: dict[str, str] = {}
        for rel in junk + kept + other:
            workspace[f"cache/{rel}"] = f"{rel}: {rng.randint(0, 10**9)}\n"
        keep_text = "".join(f"{k}\n" for k in sorted(kept))
        if variant != "infeasible":
            workspace["cache/KEEP"] = keep_text
        stays = {f"cache/{r}": workspace[f"cache/{r}"] for r in kept + other}
        tm = TestModule(helpers=f"STAYS = {stays!r}\n\n\n"
                                "def stays_intact():\n"
                                "    for path, text in STAYS.items():\n"
                                "        assert read_regular(path) == text, path")
        # one test per folder: its junk is gone and every file that must stay is intact
        for i, d in enumerate(sorted({j.rsplit("/", 1)[0] for j in junk})):
            gone = sorted(f"cache/{j}" for j in junk if j.rsplit("/", 1)[0] == d)
            tm.add(f"cleaned_{i}", f"for path in {gone!r}:\n"
                                   "    assert absent(path), path\n"
                                   "stays_intact()")
        rm = (lambda s: retry(s)) if variant == "fault" else (lambda s: s)
        solution = [rm(f"rm cache/{j}") for j in sorted(junk)]
        pattern = ("whose name starts with 'core.' or ends with '~' (at any depth)" if heldout
                   else "ending in .tmp or .bak (in any subfolder)")
        instr = (f"Free space in cache/: delete every file {pattern}, except the files listed in "
                 "cache/KEEP (one path per line, relative to cache/). Do not delete or change "
                 "anything else, and do not edit cache/KEEP.")
        return finish_card(
            type(self), variant=variant, instruction=instr, workspace=workspace, tests=tm,
            solution=solution, faults=[transient("rm")] if variant == "fault" else [],
            infeasible_reason="cache/KEEP does not exist, so which junk files must stay is unknown",
            protected=["cache/KEEP"])
