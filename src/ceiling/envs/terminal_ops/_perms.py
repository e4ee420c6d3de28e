"""Template ``terminal_ops/perm-repair``: restore file modes from written rules.

An application tree has scripts, configs, data and secret keys whose permission bits were
mangled. The rules say which mode each kind of file must have; the hidden tests check the
mode of every file that was wrong (and that no file's content changed). The oracle runs one
``chmod`` per wrong file, so difficulty (2-5, 10-20, 32-40 wrong files) sets the horizon.

Variants: ``train`` rules go by folder (``app/bin``, ``app/conf``, ``app/data``,
``app/secrets``); ``heldout`` rules go by extension over a nested tree of services
(``srv/SVC/...``); ``fault`` makes the first ``chmod`` fail; ``infeasible`` adds a rule for
the files listed in ``secrets.list``, which does not exist.

Modes are plain permission bits; the grader reads them from the final state, so the check
holds whether or not the sandbox enforces them during the episode.
"""

from __future__ import annotations

import random
from typing import ClassVar

from ...cards import FileEntry, TaskCard
from .._common import TestModule, finish_card, retry, transient, unique_names, word_pool
from .._registry import Template, Variant, register

_WRONG = {1: (2, 5), 2: (10, 20), 3: (32, 40)}
# kind -> (train folder, heldout extension, required mode)
_KINDS = {
    "script": ("bin", "sh", 0o755),
    "config": ("conf", "conf", 0o644),
    "data": ("data", "csv", 0o644),
    "secret": ("secrets", "pem", 0o600),
}
_BAD_MODES = (0o777, 0o666, 0o700, 0o604, 0o640, 0o744, 0o600, 0o755, 0o644, 0o444)


@register
class PermRepair(Template):
    family = "terminal_ops"
    name = "perm-repair"
    summary = "repair mangled file modes (scripts 755, configs/data 644, secrets 600)"
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("files", "permissions")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        heldout = variant == "heldout"
        words = word_pool(variant)
        n_wrong = rng.randint(*_WRONG[difficulty])
        n_right = rng.randint(2, 6)
        stems = unique_names(rng, words, n_wrong + n_right, sep="_")
        svcs = unique_names(rng, words, rng.randint(2, 3))
        files: dict[str, tuple[int, int]] = {}  # path -> (initial mode, wanted mode)
        for k, stem in enumerate(stems):
            kind = rng.choice(list(_KINDS))
            folder, ext, want = _KINDS[kind]
            if heldout:
                path = f"srv/{rng.choice(svcs)}/{rng.choice(('lib', 'etc', 'run'))}/{stem}.{ext}"
            else:
                path = f"app/{folder}/{stem}.{'sh' if kind == 'script' else ext}"
            bad = rng.choice([m for m in _BAD_MODES if m != want])
            files[path] = (bad if k < n_wrong else want, want)
        workspace: dict[str, FileEntry] = {}
        for path, (mode, _) in files.items():
            body = (f"#!/bin/sh\necho {path}\n" if path.endswith(".sh")
                    else f"# {path}\nvalue={rng.randint(0, 10**6)}\n")
            workspace[path] = FileEntry(body.encode(), mode)
        contents = {p: e.data.decode() for p, e in workspace.items()}
        tm = TestModule(helpers=f"CONTENTS = {contents!r}\n\n\n"
                                "def mode(path):\n"
                                "    return regular_file(path).stat().st_mode & 0o7777\n\n\n"
                                "def unchanged():\n"
                                "    for path, text in CONTENTS.items():\n"
                                "        assert read_regular(path) == text, path")
        wrong = sorted(p for p, (m, w) in files.items() if m != w)
        for i, path in enumerate(wrong):
            tm.add(f"mode_{i}", f"assert mode({path!r}) == {files[path][1]:#o}, oct(mode({path!r}))\n"
                                "unchanged()")
        ch = (lambda s: retry(s)) if variant == "fault" else (lambda s: s)
        solution = [ch(f"chmod {files[p][1]:o} {p}") for p in wrong]
        if heldout:
            rules = ("Under srv/, every *.sh file must be 0755, every *.conf and *.csv file 0644, "
                     "and every *.pem file 0600 (readable and writable by its owner only).")
        else:
            rules = ("Files in app/bin must be 0755, files in app/conf and app/data 0644, and "
                     "files in app/secrets 0600 (readable and writable by its owner only).")
        instr = (f"Some file permissions were mangled. Restore them: {rules} Do not change any "
                 "file's content.")
        if variant == "infeasible":
            instr += " Also make every file listed in secrets.list 0600."
        return finish_card(
            type(self), variant=variant, instruction=instr, workspace=workspace, tests=tm,
            solution=solution, faults=[transient("chmod")] if variant == "fault" else [],
            infeasible_reason="secrets.list does not exist, so the files it names are unknown")
