"""Template ``terminal_ops/git-revert``: undo bad commits in a repository with history.

The workspace is a git repository (``.git`` included) whose history holds some bad commits
among ordinary ones. The agent reverts each bad commit with ``git revert`` — one revert
commit each, history not rewritten, working tree clean. The hidden tests (``runner:
subject``) read the repository only through ``subject.git`` — git over a sanitised copy of
its objects, refs and index with a fresh config, so nothing in the workspace's
``.git/config`` (fsmonitor, aliases, a promisor remote with its own upload-pack, hooks,
filters) runs — and the working tree as regular files under ``$WORKSPACE``. They check every
file the bad commits touched, that every original commit is still an ancestor of ``HEAD``,
that each revert commit names the commit it reverts, and that no other file moved. The oracle is one ``git revert`` per bad commit,
newest first; difficulty (1-2, 9-14, 30-34 bad commits) sets the horizon.

Variants: ``train`` lists the bad commits' hashes in ``REVERT.txt``; ``heldout`` names them
by author (``intern``) with files in nested folders and no list; ``fault`` makes the first
``git`` call fail; ``infeasible`` lists one hash that is not in the repository.

The repository is built with ``git fast-import`` at fixed dates, so hashes and bytes are a
pure function of the seed; the index is written by ``git read-tree`` (no stat data) and
reflogs are left out. Nothing in the history reveals the hidden tests.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
from pathlib import Path
from typing import ClassVar

from ...cards import TaskCard, read_tree
from .._common import TestModule, finish_card, retry, text_lines, transient, unique_names, word_pool
from .._registry import Template, Variant, register

_BAD = {1: (1, 2), 2: (9, 14), 3: (30, 34)}
_GIT = "git -c safe.directory='*' -c user.name=x -c user.email=x@x"
_T0 = 1_700_000_000


def _git_env(home: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _blob(text: str) -> bytes:
    data = text.encode()
    return b"data %d\n" % len(data) + data + b"\n"


def build_repo(commits: list[tuple[str, str, dict[str, str]]]) -> tuple[dict, list[str]]:
    """Build a repository from (author, message, {path: new content}) commits; return its
    file tree (``.git`` plus the checked-out files) and the commit hashes, oldest first."""
    stream = bytearray()
    for i, (author, msg, files) in enumerate(commits):
        who = f"{author} <{author}@example.com> {_T0 + 3600 * i} +0000"
        stream += f"commit refs/heads/main\nmark :{i + 1}\nauthor {who}\ncommitter {who}\n".encode()
        stream += _blob(msg)
        for path, text in sorted(files.items()):
            stream += f"M 100644 inline {path}\n".encode() + _blob(text)
        stream += b"\n"
    with tempfile.TemporaryDirectory(prefix="ceiling-git-") as tmp:
        env, repo = _git_env(tmp), Path(tmp) / "repo"
        repo.mkdir()
        run = lambda *a, **k: subprocess.run(["git", *a], cwd=repo, env=env, check=True,
                                             capture_output=True, **k)
        # what `git init --template= -b main` writes, without the extra process
        for d in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
            (repo / ".git" / d).mkdir(parents=True)
        (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (repo / ".git" / "config").write_text(
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
            "\tlogallrefupdates = true\n")
        marks = Path(tmp) / "marks"
        run("fast-import", "--quiet", f"--export-marks={marks}", input=bytes(stream))
        run("read-tree", "HEAD")
        by_mark = dict(ln.split() for ln in marks.read_text().splitlines())
        shas = [by_mark[f":{i + 1}"] for i in range(len(commits))]
        final: dict[str, str] = {}
        for _, _, files in commits:
            final.update(files)
        for path, text in final.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
        tree = {p: e for p, e in read_tree(repo).items() if not p.startswith(".git/logs")}
    return tree, shas


_HELPERS = '''
_STATE = {}


def git(subject, *args):
    """git over the grader's sanitised copy of the repository (never the workspace's config)."""
    return subject.git(*args)


def state(subject):
    """(ancestors of HEAD, porcelain status, every commit message) — read once."""
    if not _STATE:
        _STATE["s"] = (set(git(subject, "rev-list", "HEAD").stdout.split()),
                       git(subject, "status", "--porcelain", "--untracked-files=no").stdout,
                       git(subject, "log", "--format=%B", "HEAD").stdout)
    return _STATE["s"]


def history_kept(subject):
    """No original commit was rewritten away, the tree is clean, other files unchanged."""
    ancestors, status, _ = state(subject)
    assert ancestors >= set(ORIGINAL), sorted(set(ORIGINAL) - ancestors)
    assert status == "", status
    for path, text in OTHERS.items():
        assert read_regular(path) == text, path
    assert git(subject, "diff", "--quiet", "HEAD", "--", *OTHERS).returncode == 0
'''


@register
class GitRevert(Template):
    family = "terminal_ops"
    name = "git-revert"
    summary = "revert bad commits with git revert, without rewriting history"
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("git",)

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        heldout = variant == "heldout"
        words = word_pool(variant)
        k = rng.randint(*_BAD[difficulty])
        n_other = rng.randint(2, 5)
        stems = unique_names(rng, words, k + n_other, sep="_")
        if heldout:
            paths = [f"pkg/{rng.choice(words)}/{s}.txt" for s in stems]
        else:
            paths = [f"{s}.{rng.choice(('txt', 'cfg', 'md'))}" for s in stems]
        bad_paths, other_paths = paths[:k], paths[k:]
        base = {p: "".join(f"{ln}\n" for ln in text_lines(rng, rng.randint(2, 5), words))
                for p in paths}
        commits: list[tuple[str, str, dict[str, str]]] = [("dev", "Initial import", dict(base))]
        current = dict(base)
        # ordinary commits edit the other files; each bad commit edits its own file once
        events = ["bad"] * k + ["ok"] * rng.randint(k // 2 + 1, k + 2)
        rng.shuffle(events)
        bad_i = 0
        bad_idx: list[int] = []
        for ev in events:
            if ev == "bad":
                p = bad_paths[bad_i]
                bad_i += 1
                current[p] = current[p] + f"debug_{rng.choice(words)} = true\n"
                author = "intern" if heldout else rng.choice(("dev", "ops"))
                bad_idx.append(len(commits))
                commits.append((author, f"Tweak {p.rsplit('/', 1)[-1]}", {p: current[p]}))
            else:
                p = rng.choice(other_paths)
                current[p] = current[p] + f"{rng.choice(words)} {rng.choice(words)}\n"
                commits.append((rng.choice(("dev", "ops")), f"Update {p.rsplit('/', 1)[-1]}",
                                {p: current[p]}))
        tree, shas = build_repo(commits)
        workspace: dict = dict(tree)
        bad_shas = [shas[i] for i in bad_idx]
        listed = list(bad_shas)
        if variant == "infeasible":
            ghost = f"{rng.getrandbits(160):040x}"
            listed.insert(rng.randrange(len(listed) + 1), ghost)
        if not heldout:
            workspace["REVERT.txt"] = "".join(f"{s}\n" for s in listed)
        others = {p: current[p] for p in other_paths}
        tm = TestModule(helpers=_HELPERS + f"\n\nORIGINAL = {shas!r}\nOTHERS = {others!r}\n")
        for i, (sha, p) in enumerate(zip(bad_shas, bad_paths, strict=True)):
            tm.add(f"reverted_{i}",
                   f"assert git(subject, 'show', 'HEAD:{p}').stdout == {base[p]!r}\n"
                   f"assert read_regular({p!r}) == {base[p]!r}\n"
                   f"assert 'This reverts commit {sha}' in state(subject)[2]\n"
                   "history_kept(subject)", subject=True)
        if variant == "infeasible":
            tm.add("reverted_listed_ghost",
                   f"assert git(subject, 'cat-file', '-e', {ghost + '^{commit}'!r})"
                   ".returncode == 0\nhistory_kept(subject)", subject=True)
        wrap = (lambda s: retry(s)) if variant == "fault" else (lambda s: s)
        lines = [wrap(f"{_GIT} revert --no-edit {sha}") for sha in reversed(bad_shas)]
        which = ("every commit authored by intern" if heldout
                 else "every commit listed in REVERT.txt (one hash per line)")
        instr = (f"This folder is a git repository. Revert {which} using git revert: one revert "
                 "commit per reverted commit (revert newer commits first). Do not rewrite "
                 "history (no reset, rebase or amend) and leave the working tree clean.")
        return finish_card(
            type(self), variant=variant, instruction=instr, workspace=workspace, tests=tm,
            solution=lines, faults=[transient("git")] if variant == "fault" else [],
            infeasible_reason="REVERT.txt lists a commit that is not in the repository",
            protected=[] if heldout else ["REVERT.txt"], runner="subject", command_timeout_s=60.0)
