"""terminal_ops templates: valid cards, determinism, held-out disjointness, and the oracle
solving / the null policy failing, executed for real on a temp copy of the workspace.

The runner below is a small stand-in for the verifier (fast: no sandbox, no grader): it
materialises the workspace, injects the card's faults the way TaskEnv does (a PATH shim that
fails the first N calls; a PATH of symlinks that omits a tool; chmod 000), runs
``card.solution`` with ``sh`` and then calls each hidden test function with ``WORKSPACE``
set (and a stand-in ``subject``), comparing the tests found with ``acceptance.tests``. The
real grader and sandbox run in the ``TaskEnv`` tests at the end, with the dodges of issue 10
class 6 (a symlink for a copy) and class 3 (git configuration that runs commands).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _subject_fake import run_hidden

from ceiling.cards import TaskCard, write_tree
from ceiling.envs import VARIANTS, make, templates
from ceiling.envs._common import EXTS_HELDOUT, WORDS_HELDOUT, WORDS_TRAIN
from ceiling.envs.terminal_ops import DEMO_OPS

FAMILY = templates("terminal_ops")
IDS = [t.template_id() for t in FAMILY]


# --- a tiny local runner ---------------------------------------------------------------

def _shim_path(card: TaskCard, root: Path) -> str:
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    shim = root / "shim"
    shim.mkdir()
    for f in card.faults:
        if f.kind == "transient":
            real = shutil.which(f.target, path=path)
            assert real, f"fault targets {f.target}, which is not installed"
            counter = root / f"count-{f.target}"
            (shim / f.target).write_text(
                "#!/bin/sh\n"
                f"n=$(cat {counter} 2>/dev/null || echo 0)\n"
                f"if [ \"$n\" -lt {f.times} ]; then echo $((n+1)) > {counter}; "
                f"echo {shlex.quote(f.message)} >&2; exit 1; fi\n"
                f'exec {real} "$@"\n')
            (shim / f.target).chmod(0o755)
    missing = {f.target for f in card.faults if f.kind == "missing_tool"}
    if not missing:
        return f"{shim}:{path}"
    links = root / "links"
    links.mkdir()
    for d in path.split(":"):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            full = os.path.join(d, name)
            if name in missing or (links / name).exists() or not os.access(full, os.X_OK):
                continue
            os.symlink(full, links / name)
    return f"{shim}:{links}"


def _hash_protected(ws: Path, patterns: list[str]) -> dict[str, str]:
    out = {}
    for p in sorted(ws.rglob("*")):
        rel = p.relative_to(ws).as_posix()
        if p.is_file() and any(fnmatch.fnmatch(rel, pat) for pat in patterns):
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def run_hidden_tests(card: TaskCard, ws: Path) -> dict[str, bool]:
    """Call every test function of the hidden files with WORKSPACE=ws (tests that take the
    grader's ``subject`` get a local stand-in, ``_subject_fake``); node id -> passed."""
    return run_hidden({k: e.data for k, e in card.tests.items()}, ws)


def episode(card: TaskCard, root: Path, *, oracle: bool) -> tuple[dict[str, bool], str]:
    """Run the oracle (or nothing: the null policy) and the hidden tests."""
    ws = root / "workspace"
    for layer in card.layers:
        write_tree(layer, ws)
    for f in card.faults:
        if f.kind == "permission":
            os.chmod(ws / f.target, 0)
    before = _hash_protected(ws, card.acceptance.protected)
    log = ""
    if oracle:
        (root / "tmp").mkdir()
        env = {"PATH": _shim_path(card, root), "WORKSPACE": str(ws), "HOME": str(ws),
               "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8"}
        proc = subprocess.run(["sh", "-c", card.solution], check=False, cwd=ws, env=env,
                              capture_output=True, text=True, timeout=60)
        log = f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert proc.returncode == 0, f"oracle failed on {card.id}: {log}"
        assert _hash_protected(ws, card.acceptance.protected) == before, \
            f"oracle changed a protected path on {card.id}"
    results = run_hidden_tests(card, ws)
    assert sorted(results) == sorted(card.acceptance.tests), \
        f"{card.id}: tests found {sorted(results)} != acceptance.tests"
    return results, log


# --- the tests ---------------------------------------------------------------------------

def test_family_has_enough_templates() -> None:
    multi = [t for t in FAMILY if "demo" not in t.tags]
    demo = {t.name for t in FAMILY if "demo" in t.tags}
    assert len(multi) >= 8, [t.template_id() for t in multi]
    assert demo == {f"demo-{op}" for op in DEMO_OPS}


@pytest.mark.parametrize("tid", IDS)
def test_every_variant_and_difficulty_makes_a_valid_card(tid: str) -> None:
    cls = next(t for t in FAMILY if t.template_id() == tid)
    for d in cls.difficulties:
        for v in VARIANTS:
            card = make(tid, seed=11, difficulty=d, variant=v)
            TaskCard.model_validate(card.model_dump())  # round-trips through the schema
            assert card.type == "terminal_ops" and card.template == tid
            assert card.horizon == cls.horizons[d], (card.id, card.horizon)
            assert card.acceptance.tests and card.tests and card.instruction
            assert card.budget.max_steps > card.solution.count("\n") + 1
            assert (v == "fault") == bool(card.faults)
            assert card.feasible == (v != "infeasible")
            if v == "infeasible":
                assert card.infeasible_reason
            for line in card.solution.splitlines():  # each line stands alone
                subprocess.run(["sh", "-n", "-c", line], check=True)
    # the difficulty knob changes the horizon: one horizon per difficulty
    assert len(set(cls.horizons.values())) == len(cls.difficulties)


@pytest.mark.parametrize("tid", IDS)
def test_make_is_deterministic_per_seed(tid: str) -> None:
    a = make(tid, seed=5, variant="heldout")
    b = make(tid, seed=5, variant="heldout")
    c = make(tid, seed=6, variant="heldout")
    assert a.content_id() == b.content_id()
    assert a.content_id() != c.content_id()


def _words(card: TaskCard) -> set[str]:
    import re

    text = card.instruction + " " + " ".join(card.workspace)
    return set(re.findall(r"[a-z]+", text))


@pytest.mark.parametrize("tid", [t.template_id() for t in FAMILY if "demo" in t.tags])
def test_demo_heldout_names_never_in_train(tid: str) -> None:
    held, train = set(WORDS_HELDOUT) | set(EXTS_HELDOUT), set()
    for seed in range(60):
        train |= _words(make(tid, seed=seed, variant="train"))
        train |= _words(make(tid, seed=seed, variant="fault"))
        h = _words(make(tid, seed=seed, variant="heldout"))
        assert h & held, h
    assert not train & held
    assert train & set(WORDS_TRAIN)


def test_demo_instructions_match_ops() -> None:
    import re

    for op, (instr, cmd) in DEMO_OPS.items():
        card = make(f"terminal_ops/demo-{op}-v1", seed=2)
        pat = re.escape(instr).replace(r"\{a\}", r"(?P<a>\S+)").replace(r"\{b\}", r"(?P<b>\S+)")
        pat = pat.replace(r"\{w\}", r"(?P<w>\w+)").replace(r"\{v\}", r"(?P<v>\w+)")
        m = re.fullmatch(pat, card.instruction)
        assert m, (op, card.instruction)
        assert card.solution.splitlines()[-1] == cmd.format(**m.groupdict())


@pytest.mark.parametrize("variant", ["train", "heldout", "fault"])
@pytest.mark.parametrize("tid", IDS)
def test_oracle_solves_and_null_fails(tid: str, variant: str, tmp_path: Path) -> None:
    cls = next(t for t in FAMILY if t.template_id() == tid)
    diffs = cls.difficulties if variant == "train" else cls.difficulties[:1]
    for d in diffs:
        card = make(tid, seed=7 + d, difficulty=d, variant=variant)
        null, _ = episode(card, tmp_path / f"null{d}", oracle=False)
        # the reward is the test pass rate: no hidden test may pass on the initial state
        assert not any(null.values()), f"{card.id}: the null policy passes {null}"
        got, log = episode(card, tmp_path / f"oracle{d}", oracle=True)
        assert all(got.values()), f"{card.id}: oracle failed {got}\n{log}"


@pytest.mark.parametrize("tid", IDS)
def test_infeasible_tests_fail_untouched(tid: str, tmp_path: Path) -> None:
    card = make(tid, seed=3, variant="infeasible")
    got, _ = episode(card, tmp_path, oracle=False)
    assert not any(got.values()), (card.id, got)
    assert "give" in card.solution or "infeasible" in card.solution


# A structural marker per multi-step template: true on every held-out card, never on a
# train / fault / infeasible card (the demo templates are checked by name pool above).
def _paths(card: TaskCard) -> list[str]:
    return [p for p in card.workspace if not p.startswith(".git/")]


HELDOUT_MARK = {
    "log-rotate": lambda c: any(p.startswith("var/log/") for p in _paths(c)),
    "cleanup-except": lambda c: any(p.rsplit("/", 1)[-1].startswith("core.") or p.endswith("~")
                                    for p in _paths(c)),
    "perm-repair": lambda c: any(p.startswith("srv/") for p in _paths(c)),
    "config-edit": lambda c: any(p.endswith(".env") for p in _paths(c)),
    "archive-extract": lambda c: any(p.startswith("data/") and p.count("/") >= 3
                                     for p in _paths(c)),
    "log-aggregate": lambda c: any(p.startswith("logs/requests-") for p in _paths(c)),
    "script-repair": lambda c: any(p.startswith("bin/") for p in _paths(c)),
    "git-revert": lambda c: "REVERT.txt" not in c.workspace and "intern" in c.instruction,
    # the multistep demo suite: held-out file extensions (names: the held-out word pool)
    **{f"multistep-{n}": lambda c: any(p.rsplit(".", 1)[-1] in EXTS_HELDOUT for p in _paths(c))
       for n in ("two", "three", "four")},
}


def test_every_multistep_template_has_a_heldout_mark() -> None:
    assert {t.name for t in FAMILY if "demo" not in t.tags} == set(HELDOUT_MARK)


@pytest.mark.parametrize("name", sorted(HELDOUT_MARK))
def test_heldout_structure_never_in_train(name: str) -> None:
    tid = f"terminal_ops/{name}-v1"
    mark = HELDOUT_MARK[name]
    cls = next(t for t in FAMILY if t.template_id() == tid)
    held_words = set(WORDS_HELDOUT)
    for seed in range(6 if name == "git-revert" else 25):  # git repos cost ~0.3 s each
        d = cls.difficulties[seed % len(cls.difficulties[:2])]  # d1/d2 keep it fast
        assert mark(make(tid, seed=seed, difficulty=d, variant="heldout")), seed
        for v in ("train", "fault", "infeasible"):
            card = make(tid, seed=seed, difficulty=d, variant=v)
            assert not mark(card), (card.id, v)
            assert not _words_of(card) & held_words, card.id


def _words_of(card: TaskCard) -> set[str]:
    import re

    return set(re.findall(r"[a-z]+", card.instruction + " " + " ".join(_paths(card))))


def _real_backend() -> str:
    from ceiling import SandboxUnavailable
    from ceiling.sandbox import open_sandbox

    try:
        open_sandbox([{}], backend="namespace").close()
        return "namespace"
    except SandboxUnavailable:
        return "local"


@pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")
def test_real_env_and_verifier_on_a_few_cards() -> None:
    """The same cards through TaskEnv and the verifier (faults injected by the env): the
    oracle is solved, submitting at once fails, giving up on the infeasible twin abstains
    correctly."""
    from ceiling.env import TaskEnv
    from ceiling.verify import Outcome

    backend = _real_backend()
    for tid in ("terminal_ops/demo-append-v1", "terminal_ops/git-revert-v1",
                "terminal_ops/perm-repair-v1", "terminal_ops/script-repair-v1"):
        card = make(tid, seed=4, variant="fault")
        env = TaskEnv(card, backend=backend)
        try:
            env.reset()
            env.step({"tool": "run", "args": {"cmd": card.solution}})
            *_, info = env.step({"tool": "submit", "args": {}})
            assert info["verdict"].outcome == Outcome.SOLVED, (card.id, info["verdict"])
            env.reset()
            _, reward, term, _, info = env.step({"tool": "submit", "args": {}})
            assert term and reward <= 0 and info["verdict"].outcome == Outcome.FAILED
        finally:
            env.close()
    card = make("terminal_ops/log-rotate-v1", seed=4, variant="infeasible")
    env = TaskEnv(card, backend=backend)
    try:
        env.reset()
        *_, info = env.step({"tool": "give_up", "args": {"reason": card.infeasible_reason}})
        assert info["verdict"].outcome == Outcome.ABSTAINED_CORRECT
    finally:
        env.close()


# --- issue 10 through TaskEnv: a symlink is not a copy (class 6), repository config that
# runs commands never runs in the grader (class 3) ---------------------------------------

def _play(card: TaskCard, cmds: list[str]):  # type: ignore[no-untyped-def]
    """Run ``cmds`` in the episode, submit; the verdict and reward."""
    from ceiling.env import TaskEnv

    env = TaskEnv(card, backend=_real_backend())
    try:
        env.reset()
        for cmd in cmds:
            env.step({"tool": "run", "args": {"cmd": cmd}})
        _, reward, term, _, info = env.step({"tool": "submit", "args": {}})
        assert term
        return info["verdict"], reward
    finally:
        env.close()


@pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")
@pytest.mark.parametrize(("tid", "cmd"), [
    ("terminal_ops/demo-copy-v1", "ln -s {a} {b}"),
    ("terminal_ops/demo-copy-v1", "ln -s $PWD/{a} {b}"),
    ("terminal_ops/demo-move-v1", "cp {a} {b} && rm {a} && ln -s {b} {a}"),
    ("terminal_ops/demo-count-v1", "mkdir .d && wc -l < {a} > .d/n && ln -s .d/n {b}"),
])
def test_a_symlink_is_not_a_copy(tid: str, cmd: str) -> None:
    """The named file must be a regular file with the bytes (read no-follow from the final
    state); a symlink to the source, or to a right answer elsewhere, earns nothing."""
    card = make(tid, seed=9)
    m = re.search(r" (\S+\.\w+) (?:to|into) (\S+\.\w+)\.$", card.instruction)
    assert m, card.instruction
    verdict, reward = _play(card, [cmd.format(a=m.group(1), b=m.group(2))])
    assert reward <= 0 and verdict.outcome.value == "failed", (verdict.outcome, verdict.tests)


@pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")
def test_symlinked_rotation_and_permissions_earn_nothing() -> None:
    """log-rotate with a symlink for NAME.log.1; perm-repair replacing each wrong file by a
    symlink to a right-mode copy: both read through lstat, both fail."""
    card = make("terminal_ops/log-rotate-v1", seed=9)
    logs = sorted(p for p in card.workspace if p.endswith(".log"))
    cmds = [f"mkdir -p .keep && cp {p} .keep/$(basename {p}).1 && : > {p} && "
            f"ln -sf $PWD/.keep/$(basename {p}).1 {p}.1" for p in logs]
    verdict, reward = _play(card, cmds)
    assert reward <= 0, verdict.tests
    card = make("terminal_ops/perm-repair-v1", seed=9)
    cmds = [f"mkdir -p .m/$(dirname {p}) && cp {p} .m/{p} && chmod "
            f"{'755' if p.endswith('.sh') else '600' if '/secrets/' in p else '644'} .m/{p} && "
            f"rm {p} && ln -s $PWD/.m/{p} {p}" for p in card.workspace]
    verdict, reward = _play(card, cmds)
    assert reward <= 0, verdict.tests


PAYLOAD = """#!/bin/sh
# runs if anything the grader does executes repository configuration
[ -n "$CEILING_PWN" ] && exit 0
export CEILING_PWN=1
touch {marker} 2>/dev/null
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
for s in $(tac REVERT.txt); do
  git -c user.name=x -c user.email=x@x revert --no-edit "$s" >/dev/null 2>&1
done
exit 0
"""
EVIL_CONFIG = """
[core]
\tfsmonitor = sh .p.sh
\thooksPath = .hooks
\tpager = sh .p.sh
\tsshCommand = sh .p.sh
[alias]
\tstatus = !sh .p.sh
\tshow = !sh .p.sh
\tlog = !sh .p.sh
[extensions]
\tpartialClone = origin
[remote "origin"]
\turl = file:///nonexistent
\tpromisor = true
\tuploadpack = sh .p.sh
[diff]
\texternal = sh .p.sh
[filter "x"]
\tclean = sh .p.sh
\tsmudge = sh .p.sh
"""


MISSING_BLOBS = ("t=$(git ls-tree HEAD | sed -E 's/blob [0-9a-f]{40}/blob "
                 "1111111111111111111111111111111111111111/' | git mktree --missing) && "
                 "c=$(git -c user.name=x -c user.email=x@x commit-tree $t -p HEAD -m x) && "
                 "git update-ref refs/heads/main $c")


@pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")
@pytest.mark.parametrize("promisor", [False, True])
def test_git_config_that_runs_commands_earns_nothing(tmp_path: Path, promisor: bool) -> None:
    """Nothing reverted; .git/config sets fsmonitor, aliases, a pager, a promisor remote
    with its own upload-pack, an external diff, filters and a hooks folder that would do the
    reverts (and touch a marker on the host) if the grader's git ran them. With ``promisor``
    HEAD also moves to a commit whose blobs are missing, so a git that honours the
    repository's config runs the upload-pack command as soon as a test reads a file (checked
    with the host's git below). The grader reads the repository through a sanitised copy:
    the reward is 0 and the marker never appears."""
    marker = tmp_path / "host-marker"
    card = make("terminal_ops/git-revert-v1", seed=9, variant="train")
    payload = PAYLOAD.replace("{marker}", str(marker))
    hook = "#!/bin/sh\nsh .p.sh\n"
    cmds = [f"cat > .p.sh <<'EOF'\n{payload}EOF", *([MISSING_BLOBS] if promisor else []),
            ("mkdir -p .hooks && for h in post-checkout pre-commit post-index-change "
             f"reference-transaction; do printf %s {shlex.quote(hook)} > .hooks/$h; "
             "chmod +x .hooks/$h; done"),
            f"cat >> .git/config <<'EOF'\n{EVIL_CONFIG}"
            + ("[core]\n\trepositoryformatversion = 1\n" if promisor else "") + "EOF",
            "echo '* filter=x' > .gitattributes"]
    verdict, reward = _play(card, cmds)
    assert reward <= 0 and verdict.outcome.value in ("failed", "hack_detected"), verdict.tests
    assert all(t.status != "passed" for t in verdict.tests), verdict.tests
    assert not marker.exists()
    if promisor:  # the same workspace, read by a git that honours the repository config
        ws = tmp_path / "ws"
        for layer in card.layers:
            write_tree(layer, ws)
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
        for cmd in cmds:
            subprocess.run(["sh", "-c", cmd], cwd=ws, env=env, check=False, capture_output=True)
        path = card.workspace["REVERT.txt"] and next(p for p in card.workspace
                                                     if p.endswith((".txt", ".cfg", ".md"))
                                                     and p != "REVERT.txt")
        subprocess.run(["git", "-c", "safe.directory=*", "show", f"HEAD:{path}"], cwd=ws,
                       env=env, check=False, capture_output=True)
        assert marker.exists(), "the attack does not fire on a git that reads the config"
