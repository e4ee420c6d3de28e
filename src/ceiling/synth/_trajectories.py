"""``ceiling synth trajectories``: cards recovered from agent trajectories.

For each trajectory (:mod:`._traj_read`: ceiling's JSONL or the generic JSONL):

1. :func:`~._replay.recover` replays its file operations over a symbolic workspace and
   recovers the initial workspace (exact where observed, filled only where the operations
   never depend on the content; anything else is refused with a reason).
2. The hidden tests (``runner: files``, ``initial_state``: they read the final files
   under ``$WORKSPACE`` and the card's initial files under ``$INITIAL``) come from the
   end state, one test per path it touched: exact content where the trajectory determines
   it, else the recorded operations replayed on the initial content (a move or copy, the
   appends, substitutions and edits, a line count), absence of removed paths, modes set
   by ``chmod``. A trajectory with a command the replay cannot invert gets one test
   instead: the end state against the verifier's reference run of the trajectory's
   commands from the card's start (``acceptance.reference``, ``$REFERENCE``).
3. The oracle replays the trajectory's actions (``run`` commands as they were, ``write``
   and ``edit`` as ``python3`` one-liners).
4. The same gates as repo synthesis (:func:`ceiling.check.validate`: oracle passes, the
   untouched workspace fails, exploits earn nothing).

**Depth** (``--depth N``): up to N recovered trajectories with disjoint paths chained into
one multi-round card (the instructions as numbered rounds, the oracles in order, every
round's tests). **Breadth** (``--breadth N``): pairs where the second trajectory only
moves, copies, deletes, appends to or changes the mode of an input file: that input is
renamed to a file the first trajectory produces, so one's output is the other's input.

:func:`fidelity` measures, where the truth is known (trajectories of ceiling's own
generated cards, whose card ids name template, seed, difficulty and variant), the share of
trajectories whose initial workspace was recovered exactly and the share whose card is
valid and whose tests accept the original oracle's final state. The truth is used for the
measurement only, never for synthesis.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cards import (
    TASK_TYPES,
    Acceptance,
    Budget,
    FileEntry,
    TaskCard,
    horizon_for_steps,
    save_card,
)
from ._manifest import decisions, manifest, report
from ._replay import Recovery, Unrecoverable, Val, recover
from ._traj_read import Traj, read_trajs, slug

Progress = Callable[[dict[str, Any]], None]


@dataclass
class TrajOptions:
    limit: int | None = None
    backend: str = "namespace"
    workers: int = 2
    executor: str = "local"  # where validation episodes run: local | ray
    ray_address: str | None = None
    exploits: int = 1
    depth: int = 0  # chain up to this many trajectories into one card (0: off)
    breadth: int = 0  # combine up to this many pairs (0: off)
    fidelity: bool = True  # measure against generated cards when the trajectory names one
    batch: int = 8


@dataclass
class Piece:
    """One recovered trajectory, ready to become (part of) a card."""

    traj: Traj
    rec: Recovery
    files: dict[str, tuple[bytes, int, bool]] = field(default_factory=dict)
    tests: list[tuple[str, str]] = field(default_factory=list)  # (test name, body)
    oracle: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)  # bystander files added (protected)


BYSTANDER = b"This file is not part of the task; leave it as it is.\n"


def _bystander(rec: Recovery) -> str:
    """A path no operation of the trajectory names, beside the first removed path."""
    used = set(rec.init_exists) | set(rec.final) | rec.dirs
    first = min(p for p, v in rec.final.items() if v is None)
    folder = first.rsplit("/", 1)[0] + "/" if "/" in first else ""
    for name in ("notes.txt", "README.txt", "keep.txt"):
        if folder + name not in used:
            return folder + name
    n = 0
    while f"{folder}keep-{n}.txt" in used:
        n += 1
    return f"{folder}keep-{n}.txt"


TEST_HEAD = '''"""Hidden tests (synthesized from a trajectory's end state). They read the final files
under WORKSPACE as data and the card's initial files under INITIAL (a host copy the
grader writes); they import nothing from the workspace."""
import os
import re
import stat
from pathlib import Path

WS = Path(os.environ["WORKSPACE"])


def data(rel):
    p = WS / rel
    assert p.is_file() and not p.is_symlink(), f"{rel} is missing or not a regular file"
    return p.read_bytes()


def initial(rel):
    p = Path(os.environ["INITIAL"]) / rel
    assert p.is_file() and not p.is_symlink(), f"{rel} was not a file at the start"
    return p.read_bytes()


def sed_sub(data, a, b, glob):
    pat = re.compile(re.escape(a).replace(rb"\\.", b"."))
    return b"\\n".join(pat.sub(lambda _m: b, line, count=0 if glob else 1)
                       for line in data.split(b"\\n"))


def replay(rel, ops):
    """What the trajectory's operations make of rel's initial content."""
    return replay_on(initial(rel), ops)


def replay_on(got, ops):
    for op in ops:
        if op[0] == "append":
            got += op[1]
        elif op[0] == "edit":
            assert got.count(op[1]) == 1, "the edit's old text occurs once at the start"
            got = got.replace(op[1], op[2], 1)
        elif op[0] == "sub":
            got = sed_sub(got, op[1], op[2], op[3])
    return got
'''


REFERENCE_HELPERS = '''

MAX_ARCHIVE_BYTES = 32 << 20
MAX_MEMBERS = 10000


def entries(root):
    """rel -> ("file", path) | ("dir",) | ("link", target) | ("other",) under a trusted
    host folder (INITIAL, REFERENCE); links are never followed."""
    out = {}
    for dirpath, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", full)
            else:
                out[rel] = ("other",)
    return out


def same(a, b):
    if a[0] != b[0]:
        return False
    if a[0] == "file":
        return Path(a[1]).read_bytes() == Path(b[1]).read_bytes()
    return a == b


def members(path):
    """An archive's members as sorted (name, kind, content or link target), read with
    caps on total size and count (the workspace's file may be hostile: a bomb fails)."""
    import gzip
    import tarfile
    import zipfile

    name, out, total = str(path), [], 0
    if name.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            for i in z.infolist():
                total += i.file_size
                assert total <= MAX_ARCHIVE_BYTES and len(out) < MAX_MEMBERS, "archive too big"
                out.append((i.filename, "dir" if i.is_dir() else "file",
                            b"" if i.is_dir() else z.read(i)))
        return sorted(out)
    if name.endswith(".gz") and not name.endswith(".tar.gz"):
        with gzip.open(path) as f:
            data = f.read(MAX_ARCHIVE_BYTES + 1)
        assert len(data) <= MAX_ARCHIVE_BYTES, "archive too big"
        return [("", "file", data)]
    with tarfile.open(path) as t:
        for m in t:
            total += max(m.size, 0)
            assert total <= MAX_ARCHIVE_BYTES and len(out) < MAX_MEMBERS, "archive too big"
            body = t.extractfile(m).read() if m.isreg() else m.linkname.encode()
            out.append((m.name.rstrip("/"), "file" if m.isreg() else str(m.type), body))
    return sorted(out)


ARCHIVES = (".tar.gz", ".tgz", ".tar", ".zip", ".gz")
'''
REFERENCE_TEST = '''def test_matches_reference():
    """Every path the task's own steps change (run by the grader from this card's start,
    under REFERENCE) is in the workspace as they leave it; archives compare by members."""
    ref, ini = entries(os.environ["REFERENCE"]), entries(os.environ["INITIAL"])
    changed = sorted(r for r in set(ref) | set(ini)
                     if r not in ref or r not in ini or not same(ref[r], ini[r]))
    assert changed, "the reference run changed nothing"
    for rel in changed:
        w = WS / rel
        for i in range(1, len(Path(rel).parts)):  # no folder on the way is a link
            assert not (WS / Path(*Path(rel).parts[:i])).is_symlink(), \
                f"{Path(*Path(rel).parts[:i])} must be a folder, not a link"
        want = ref.get(rel)
        if want is None:
            assert not os.path.lexists(w), f"{rel} must not exist"
            continue
        assert os.path.lexists(w), f"{rel} is missing"
        st = os.lstat(w)
        if want[0] == "dir":
            assert stat.S_ISDIR(st.st_mode), f"{rel} must be a folder"
        elif want[0] == "link":
            assert stat.S_ISLNK(st.st_mode) and os.readlink(w) == want[1], \
                f"{rel} must be a link to {want[1]}"
        elif want[0] == "file":
            assert stat.S_ISREG(st.st_mode), f"{rel} must be a regular file"
            if rel.endswith(ARCHIVES):
                try:
                    got = members(w)
                except AssertionError:
                    raise
                except Exception as e:
                    raise AssertionError(f"{rel} is not a readable archive: {e}") from None
                assert got == members(want[1]), f"{rel} does not hold the expected members"
            else:
                assert st.st_size == os.path.getsize(want[1]) and \
                    w.read_bytes() == Path(want[1]).read_bytes(), \
                    f"{rel} does not hold what the task's steps produce"
'''


def unchanged(rec: Recovery) -> set[str]:
    """Initial files the trajectory left as they were (read, or not touched): protected,
    so a copy can be checked against its source."""
    out = set()
    for p, ex in rec.init_exists.items():
        if not ex or p in rec.dirs or p in rec.final_mode:
            continue
        if p not in rec.final:
            out.add(p)
            continue
        v = rec.final[p]
        if v is not None and v.base == p and not v.ops:
            out.add(p)
    return out


def _test_for(rec: Recovery, p: str, name: str, fills: dict[str, bytes]) -> str | None:
    v = rec.final.get(p, "missing")
    lines: list[str] = []
    if v is None:
        lines.append(f"    assert not os.path.lexists(WS / {p!r}), {p + ' must not exist'!r}")
    elif v != "missing":
        exact = rec.final_value(p)
        if rec.is_count(p):
            counted = v.ops[0][2] if len(v.ops[0]) > 2 else None  # type: ignore[union-attr]
            if isinstance(counted, Val) and counted.base is not None:
                # recounted from the card's initial content (exact for any start)
                lines.append(f"    want = replay({counted.base!r}, {counted.ops!r})")
                lines.append(f"    assert data({p!r}) == b'%d\\n' % want.count(b'\\n')")
            else:
                lines.append(f"    assert data({p!r}).strip().isdigit(), 'a line count'")
        elif exact is not None:
            lines.append(f"    assert data({p!r}) == {exact!r}")
        elif v.base is not None and v.base in fills:  # type: ignore[union-attr]
            # content never seen: the recorded operations replayed on the card's initial
            # content ($INITIAL), so the test holds for whatever the start held (a move,
            # a copy, appends, substitutions, edits)
            lines.append(f"    assert data({p!r}) == replay({v.base!r}, "  # type: ignore[union-attr]
                         f"{v.ops!r})")  # type: ignore[union-attr]
        else:
            lines.append(f"    data({p!r})")
    if p in rec.final_mode and rec.final.get(p, "missing") is not None:
        lines.append(f"    assert stat.S_IMODE(os.lstat(WS / {p!r}).st_mode) == "
                     f"{rec.final_mode[p]:#o}")
    if not lines:
        return None
    return f"def {name}():\n" + "\n".join(lines) + "\n"


def _oracle(rec: Recovery) -> list[str]:
    out = []
    for tool, args in rec.actions:
        if tool == "run":
            out.append(str(args.get("cmd", "")))
        elif tool == "write":
            code = ("import pathlib,sys; p=pathlib.Path(sys.argv[1]); "
                    "p.parent.mkdir(parents=True, exist_ok=True); p.write_text(sys.argv[2])")
            out.append(f"python3 -c {shlex.quote(code)} {shlex.quote(str(args['path']))} "
                       f"{shlex.quote(str(args.get('content', '')))}")
        elif tool == "edit":
            code = ("import pathlib,sys; p=pathlib.Path(sys.argv[1]); t=p.read_text(); "
                    "p.write_text(t.replace(sys.argv[2], sys.argv[3], 1))")
            out.append(f"python3 -c {shlex.quote(code)} {shlex.quote(str(args['path']))} "
                       f"{shlex.quote(str(args.get('old', '')))} "
                       f"{shlex.quote(str(args.get('new', '')))}")
    return out


def piece(traj: Traj) -> Piece:
    """Recover one trajectory (raises :class:`Unrecoverable`)."""
    if traj.outcome is not None and traj.outcome not in ("solved",):
        if traj.outcome in ("abstained_correct", "abstained_wrong"):
            raise Unrecoverable("gave_up", traj.outcome)
        raise Unrecoverable("not_solved", traj.outcome)
    rec = recover(traj)
    pc = Piece(traj, rec, rec.initial_files(), [], _oracle(rec))
    if rec.opaque:
        # a command the replay does not invert: its effect is only known by running it,
        # so the end state is compared with the verifier's reference run from this start
        pc.tests = [("test_matches_reference", REFERENCE_TEST)]
        return pc
    fills = {p: d for p, (d, _m, _e) in pc.files.items()}
    gone: list[str] = []
    for i, p in enumerate(sorted(rec.final)):
        if p in rec.dirs:
            continue
        body = _test_for(rec, p, f"test_path_{i}", fills)
        if body and rec.final.get(p) is None:
            gone.append(body.split("\n", 1)[1])  # an absence check
        elif body:
            pc.tests.append((f"test_path_{i}", body))
    if pc.tests and gone:
        # absences alone would pay a deleted workspace: every presence test checks them
        pc.tests = [(n, b + "".join(gone)) for n, b in pc.tests]
    elif gone:
        # only deletions: a workspace holding nothing but the doomed files would pay
        # "delete everything" (ceiling redteam found it: 1.0 on cleanup and delete cards).
        # A file the task never names joins the workspace and must stay as it was; the
        # check is relative to $INITIAL, so a start without that file (the original
        # card's) leaves it vacuous.
        keep = _bystander(rec)
        pc.files[keep] = (BYSTANDER, 0o644, False)
        pc.keep.append(keep)
        pc.tests = [("test_only_the_named_paths_go", (
            "def test_only_the_named_paths_go():\n"
            f"    if (Path(os.environ['INITIAL']) / {keep!r}).is_file():\n"
            f"        assert data({keep!r}) == initial({keep!r}), "
            f"{keep + ' was not to be touched'!r}\n" + "".join(gone)))]
    if not pc.tests:
        raise Unrecoverable("no_effect", "nothing to test in the end state")
    return pc


def _instruction(pcs: Sequence[Piece]) -> str:
    def one(pc: Piece) -> str:
        if pc.traj.instruction.strip():
            return pc.traj.instruction.strip()
        parts = []
        for p, v in sorted(pc.rec.final.items()):
            if v is None:
                parts.append(f"{p} must no longer exist")
            elif pc.rec.final_value(p) is not None:
                parts.append(f"{p} must contain exactly {pc.rec.final_value(p)!r}")
            else:
                if v.base is not None and v.base != p:
                    parts.append(f"{p} must hold what {v.base} held at the start")
                for op in v.ops:
                    if op[0] == "count":
                        parts.append(f"write the number of lines of {op[1]} to {p}")
                    elif op[0] == "append":
                        parts.append(f"append {op[1]!r} to {p}")
                    elif op[0] in ("sub", "edit"):
                        parts.append(f"in {p}, replace {op[1]!r} with {op[2]!r}"
                                     + (" everywhere" if op[0] == "sub" and op[3] else ""))
            if p in pc.rec.final_mode and v is not None:
                parts.append(f"{p} must have mode {pc.rec.final_mode[p]:o}")
        if pc.rec.opaque:
            parts = [x for x in parts if "must contain exactly" not in x] + [
                "the files must end as these commands leave them: " + "; ".join(
                    f"`{c}`" for c in pc.rec.opaque)]
        return "Bring the workspace to this state: " + "; ".join(parts) + "."
    if len(pcs) == 1:
        return one(pcs[0])
    return "This task has several rounds; do them in order.\n\n" + "\n\n".join(
        f"Round {i + 1}: {one(pc)}" for i, pc in enumerate(pcs))


def build_card(pcs: Sequence[Piece], kind: str) -> TaskCard:
    key = hashlib.sha256("|".join(pc.traj.id for pc in pcs).encode()).hexdigest()[:10]
    name = slug(pcs[0].traj.card_id or pcs[0].traj.id)
    reference = any(pc.rec.opaque for pc in pcs)
    tests_src = TEST_HEAD + (REFERENCE_HELPERS if reference else "")
    ids = []
    for r, pc in enumerate(pcs):
        for tname, body in pc.tests:
            if body is REFERENCE_TEST:  # one comparison covers every round
                if r == min(i for i, q in enumerate(pcs) if q.rec.opaque):
                    tests_src += "\n\n" + body
                    ids.append(f"test_end_state.py::{tname}")
                continue
            t = f"{tname}_r{r}" if len(pcs) > 1 else tname
            tests_src += "\n\n" + body.replace(f"def {tname}(", f"def {t}(", 1)
            ids.append(f"test_end_state.py::{t}")
    ws: dict[str, FileEntry] = {}
    for pc in pcs:
        for p, (d, mode, _exact) in pc.files.items():
            ws[p] = FileEntry(d, mode=mode)
    for pc in pcs:  # folders the trajectory made are not there at the start
        for folder in pc.rec.dirs:
            for p in list(ws):
                if p == folder:
                    del ws[p]
    oracle = [c for pc in pcs for c in pc.oracle]
    typ = pcs[0].traj.type if pcs[0].traj.type in TASK_TYPES else "terminal_ops"
    steps = len(oracle) + 1
    card = TaskCard(
        id=f"synth_traj/{name}-{key}-v1".replace("@", "-").replace("=", "-"), type=typ,  # type: ignore[arg-type]
        horizon=horizon_for_steps(steps), instruction=_instruction(pcs),
        budget=Budget(max_steps=max(30, 3 * steps), command_timeout_s=10.0,
                      episode_timeout_s=600.0),
        acceptance=Acceptance(tests=ids, runner="files", initial_state=True,
                              reference=reference, protected=sorted(
            ({q for pc in pcs for q in unchanged(pc.rec)} | {q for pc in pcs for q in pc.keep})
            & set(ws))),
        difficulty=min(10, len(pcs)), tags=["synth", "synth_traj", kind],
        template=f"synth_traj/{kind}")
    card.workspace = ws
    card.tests = {"test_end_state.py": FileEntry(tests_src.encode())}
    card.solution = "set -e\n" + "\n".join(oracle) + "\n"
    from ..verify import oracle_call_count

    card.horizon = horizon_for_steps(oracle_call_count(card))
    return card


def _disjoint(a: Piece, b: Piece) -> bool:
    pa = set(a.files) | set(a.rec.final) | a.rec.dirs
    pb = set(b.files) | set(b.rec.final) | b.rec.dirs
    return not (pa & pb)


def chains(pcs: Sequence[Piece], depth: int) -> list[tuple[Piece, ...]]:
    """Groups of up to ``depth`` pieces with disjoint paths (consecutive, greedy)."""
    out: list[tuple[Piece, ...]] = []
    i = 0
    while i < len(pcs) and depth >= 2:
        group = [pcs[i]]
        j = i + 1
        while j < len(pcs) and len(group) < depth:
            if all(_disjoint(g, pcs[j]) for g in group):
                group.append(pcs[j])
            j += 1
        if len(group) >= 2:
            out.append(tuple(group))
        i = j
    return out


def _agnostic_input(pc: Piece) -> str | None:
    """An initial file whose content the trajectory never depends on (filled, no literal;
    never one a command the replay does not invert reads)."""
    if pc.rec.opaque:
        return None
    for p, (_d, _m, exact) in sorted(pc.files.items()):
        if not exact and p not in pc.rec.needs:
            return p
    return None


def _produced(pc: Piece) -> str | None:
    if pc.rec.opaque:  # what it leaves is only known by running it
        return None
    for p, v in sorted(pc.rec.final.items()):
        if v is not None and not pc.rec.init_exists.get(p, False) and p not in pc.rec.dirs:
            return p
    return None


def breadth_pairs(pcs: Sequence[Piece], n: int) -> list[tuple[Piece, Piece, str, str]]:
    """Pairs (first, second, output of first, input of second) to combine."""
    out = []
    for a in pcs:
        x = _produced(a)
        if x is None:
            continue
        for b in pcs:
            if b is a or not _disjoint(a, b):
                continue
            y = _agnostic_input(b)
            if y is None:
                continue
            out.append((a, b, x, y))
            break
        if len(out) >= n:
            break
    return out


def rename_input(pc: Piece, old: str, new: str) -> Piece | None:
    """``pc`` with input ``old`` renamed to ``new`` everywhere (None if not clean)."""
    import copy

    from ._traj_read import Step

    def fix(text: str) -> str:
        return re.sub(rf"(?<![\w./-]){re.escape(old)}(?![\w./-])", new, text)

    steps = []
    for s in pc.traj.steps:
        args = {k: (fix(v) if isinstance(v, str) and k in ("cmd", "path") else v)
                for k, v in s.args.items()}
        steps.append(Step(s.tool, args, s.output))
    t = copy.copy(pc.traj)
    t.steps = steps
    t.id = f"{pc.traj.id}+in={new}"
    t.instruction = fix(pc.traj.instruction)
    try:
        return piece(t)
    except Unrecoverable:
        return None


def combine_breadth(a: Piece, b: Piece, x: str, y: str) -> TaskCard | None:
    b2 = rename_input(b, y, x)
    if b2 is None:
        return None
    b2.files.pop(x, None)  # the second's input is the first's output
    # ... so its tests start from what the first leaves in x, not from an initial x
    exact, fx = a.rec.final_value(x), a.rec.final.get(x)
    if exact is not None:
        start = repr(exact)
    elif fx is not None and fx.base is not None and fx.base in a.files:
        start = f"replay({fx.base!r}, {fx.ops!r})"
    else:
        return None
    b2.tests = [(n, body.replace(f"replay({x!r}, ", f"replay_on({start}, "))
                for n, body in b2.tests]
    a2 = Piece(a.traj, a.rec, dict(a.files), list(a.tests), list(a.oracle), list(a.keep))
    # the first's test of x no longer holds once the second consumed it: drop it
    keep = []
    for name, body in a2.tests:
        if repr(x) not in body:
            keep.append((name, body))
    a2.tests = keep
    if not a2.tests and not b2.tests:
        return None
    return build_card([a2, b2], "breadth")


def synth_trajectories(file: str | os.PathLike[str], out: str | os.PathLike[str],
                       opts: TrajOptions | None = None, *,
                       progress: Progress | None = None) -> dict[str, Any]:
    """Recover, build and validate cards from the trajectories in ``file``."""
    from ._gates import evidence, validate_batch

    opts = opts or TrajOptions()
    dest = Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    trajs = read_trajs(Path(file))
    log, man = decisions(dest), manifest(dest)
    past = {r["key"]: r for r in log.read() if r.get("kind") == "trajectory"}
    pieces: list[Piece] = []
    fresh: list[dict[str, Any]] = []
    pending: list[tuple[str, list[Piece], TaskCard, str]] = []
    cards_total = sum(1 for r in past.values() if r.get("result") == "card")
    recovered: list[tuple[Traj, Piece | None]] = []
    project = Path(str(file)).name

    def rec_for(key: str, result: str, reason: str | None, kind: str, **kw: Any
                ) -> dict[str, Any]:
        return {"key": key, "result": result, "reason": reason, "kind": "trajectory",
                "project": project, "version": "", "modifiers": [kind], **kw}

    for t in trajs:
        key = hashlib.sha256(f"single|{t.id}".encode()).hexdigest()[:16]
        try:
            pc = piece(t)
        except Unrecoverable as e:
            recovered.append((t, None))
            if key not in past:
                r = rec_for(key, "refused", e.reason, "single", detail=e.detail[:200],
                            traj=t.id)
                log.append(r)
                fresh.append(r)
            continue
        recovered.append((t, pc))
        pieces.append(pc)
        if key not in past:
            pending.append((key, [pc], build_card([pc], "single"), "single"))
    for group in chains(pieces, opts.depth):
        key = hashlib.sha256(("depth|" + "|".join(p.traj.id for p in group)).encode()
                             ).hexdigest()[:16]
        if key not in past:
            pending.append((key, list(group), build_card(group, "depth"), "depth"))
    for a, b, x, y in breadth_pairs(pieces, opts.breadth):
        key = hashlib.sha256(f"breadth|{a.traj.id}|{b.traj.id}".encode()).hexdigest()[:16]
        card = combine_breadth(a, b, x, y)
        if card is not None and key not in past:
            pending.append((key, [a, b], card, "breadth"))
    valid_ids: dict[str, TaskCard] = {}
    for i in range(0, len(pending), opts.batch):
        if opts.limit is not None and cards_total >= opts.limit:
            break
        chunk = pending[i:i + opts.batch]
        verdicts, vrep = validate_batch([c for _k, _p, c, _kind in chunk], backend=opts.backend,
                                     workers=opts.workers, exploits=opts.exploits,
                                     executor=opts.executor, ray_address=opts.ray_address)
        for key, pcs, card, kind in chunk:
            why = verdicts.get(card.id)
            if why is None and (opts.limit is None or cards_total < opts.limit):
                folder = card.id.split("/", 1)[1]
                save_card(card, dest / folder)
                man.append({"card": folder, "id": card.id, "kind": "trajectory",
                            "source": str(file), "project": project, "version": "",
                            "modifiers": [kind], "trajectories": [p.traj.id for p in pcs],
                            "filled": sorted(p for pc in pcs for p, v in pc.files.items()
                                             if not v[2]),
                            "difficulty": card.difficulty, "split": card.split})
                cards_total += 1
                valid_ids[pcs[0].traj.id if kind == "single" else key] = card
                r = rec_for(key, "card", None, kind, card=folder)
            else:
                r = rec_for(key, "refused", why or "limit", kind,
                            evidence=evidence(vrep, card.id),
                            trajectories=[p.traj.id for p in pcs])
            log.append(r)
            fresh.append(r)
        if progress:
            progress(report(fresh, seconds=time.perf_counter() - t0))
    rep = report(fresh, seconds=time.perf_counter() - t0, extra={
        "trajectories": len(trajs), "recovered": len(pieces), "cards_total": cards_total,
        "out": str(dest)})
    if opts.fidelity:
        fid = fidelity(recovered, valid_ids, backend=opts.backend)
        if fid is not None:
            rep["fidelity"] = fid
    return rep


def _truth(card_id: str | None) -> TaskCard | None:
    m = re.fullmatch(r"(?P<t>[a-z0-9_]+/[a-z0-9_.\-]+-v\d+)@s(?P<s>\d+)-d(?P<d>\d+)-(?P<v>\w+)",
                     card_id or "")
    if not m:
        return None
    try:
        from ..envs import make

        return make(m["t"], seed=int(m["s"]), difficulty=int(m["d"]), variant=m["v"])
    except Exception:  # noqa: BLE001 - not a generated card here
        return None


def _merged(card: TaskCard) -> dict[str, FileEntry]:
    out: dict[str, FileEntry] = {}
    for layer in card.layers:
        out.update(layer)
    return {p: e for p, e in out.items() if e.kind == "file"}


def fidelity(recovered: Sequence[tuple[Traj, Piece | None]], valid: dict[str, TaskCard], *,
             backend: str) -> dict[str, Any] | None:
    """Per family: trajectories, exact initial workspaces, valid cards whose tests accept
    the original oracle's final state. None when no trajectory names a generated card."""
    from ..check import run_plan
    from ..verify import oracle_plan

    fam: dict[str, dict[str, Any]] = {}
    for t, pc in recovered:
        truth = _truth(t.card_id)
        if truth is None:
            continue
        row = fam.setdefault(truth.type, {"trajectories": 0, "solved": 0, "exact_initial": 0,
                                          "valid_cards": 0, "accepts_original": 0})
        row["trajectories"] += 1
        row["solved"] += int(t.outcome == "solved")
        if pc is None:
            continue
        want = _merged(truth)
        got = pc.files
        if set(want) == set(got) and all(want[p].data == got[p][0] and
                                         want[p].mode & 0o777 == got[p][1] for p in want):
            row["exact_initial"] += 1
        card = valid.get(t.id)
        if card is None:
            continue
        row["valid_cards"] += 1
        check = card.model_copy(update={"solution": truth.solution, "faults": truth.faults})
        check.workspace = truth.workspace
        check.base_layers = list(truth.base_layers)
        v, _ = run_plan(check, oracle_plan(), backend=backend)
        row["accepts_original"] += int(v.outcome.passed)
    if not fam:
        return None
    for row in fam.values():
        n = row["trajectories"] or 1
        row["exact_share"] = round(row["exact_initial"] / n, 3)
        row["valid_share"] = round(row["valid_cards"] / n, 3)
        row["accepts_original_share"] = round(row["accepts_original"] / n, 3)
        # infeasible cards' trajectories give up: nothing to recover from them
        row["valid_share_of_solved"] = round(row["valid_cards"] / max(1, row["solved"]), 3)
    return fam
