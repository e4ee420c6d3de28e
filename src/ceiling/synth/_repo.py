"""``ceiling synth repo``: bugs injected into a real Python project, validated into cards.

Pipeline (docs/synthesis.md):

1. :func:`~._source.load_source` reads the project (a folder or a PyPI sdist); it becomes
   the cards' shared base layer (``layers/00``, hard-linked across the output folder's
   cards, stored once by the sandbox's layer store).
2. :func:`~._baseline.load_or_run`: the test suite twice under the card grader (stable,
   flaky, failing tests) and a coverage run (which tests run which functions).
3. :func:`~._modifiers.find_bugs` over covered functions above the complexity threshold,
   round-robin over modifiers; validated single bugs are later combined 2-4 at a time
   across functions and files (``combo_share`` of the candidates).
4. Gates (:mod:`._gates`): screen (>= 1 fail-to-pass, >= 1 pass-to-pass), dedupe by
   (failing set, diff), :func:`ceiling.check.validate` (oracle passes, null fails, no flake,
   exploits earn nothing), truncated oracle for multi-place bugs.
5. The card: ``type: repo_refactor``, ``acceptance.runner: inprocess`` (the project's own
   tests import its code), the workspace = the mutated files over the base layer, hidden
   tests = the test files that run the mutated functions (fail-to-pass and pass-to-pass),
   the oracle = the reverse patch, the project's test files protected, an issue-like
   instruction (:mod:`._issue_text`). A manifest line and a log line per decision
   (:mod:`._manifest`) make the run resumable.

Limits: bugs that make a test hang cost the card's test timeout before they are refused;
difficulty is the generator's estimate (bugs and failing tests); ``--policy`` measures it
as a base policy's pass rate afterwards (:mod:`._difficulty`).
"""

from __future__ import annotations

import filecmp
import hashlib
import os
import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ..cards import Acceptance, Budget, FileEntry, TaskCard, horizon_for_steps, save_card
from ._baseline import Baseline, load_or_run
from ._gates import evidence, screen, truncated_passes, validate_batch
from ._hidden import helper_files, hidden_tests
from ._issue_text import rewrite_with_model, template_issue
from ._manifest import decisions, manifest, report
from ._modifiers import ALL_MODIFIERS, Bug, apply_edits, find_bugs
from ._source import Project, load_source

Progress = Callable[[dict[str, Any]], None]


def _overlap(a: Bug, b: Bug) -> bool:
    """Whether two bugs edit overlapping byte ranges of the same file."""
    return a.path == b.path and any(x.start < y.end and y.start < x.end
                                    for x in a.edits for y in b.edits)


@dataclass
class RepoOptions:
    """Knobs of :func:`synth_repo` (the CLI's options)."""

    limit: int | None = None  # stop once the folder holds this many cards of the project
    seed: int = 0
    backend: str = "namespace"
    workers: int = 2
    executor: str = "local"  # where validation episodes run: local | ray
    ray_address: str | None = None
    split: str = "train"
    combo_share: float = 0.25
    max_candidates: int | None = None
    writer: str | None = None
    exploits: int = 1
    batch: int = 8


@dataclass
class Candidate:
    key: str
    bugs: tuple[Bug, ...]
    card: TaskCard | None = None


def _sha(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()


def bug_key(bugs: tuple[Bug, ...]) -> str:
    parts: list[bytes | str] = []
    for b in sorted(bugs, key=lambda b: (b.path, b.edits[0].start)):
        for e in b.edits:
            parts += [e.path, str(e.start), str(e.end), e.text]
    return _sha(*parts)[:16]


class RepoSynth:
    """One project's synthesis into ``out`` (see the module docstring)."""

    def __init__(self, project: Project, baseline: Baseline, out: Path, opts: RepoOptions):
        self.p, self.b, self.out, self.o = project, baseline, out, opts
        self.names_rev = {v: k for k, v in baseline.names.items()}
        self.by_file: dict[str, list[str]] = {}
        for nid in baseline.stable:
            self.by_file.setdefault(nid.split("::", 1)[0], []).append(nid)
        self.log = decisions(out)
        self.manifest = manifest(out)
        self.layer_store = out / ".synth" / "layers" / project.slug
        self.test_paths = sorted(project.test_files)
        # the test tree is protected: its test files, and the helpers beside them (the
        # hidden tests carry their own copies, but an import left pointing at the
        # workspace must not read an edited one)
        self.protected = sorted({*self.test_paths,
                                 *helper_files(project.tree, self.test_paths).values()})

    # -------------------------------------------------------------- candidates
    def singles(self) -> list[Bug]:
        rng = random.Random(f"{self.o.seed}|{self.p.slug}")
        covered = set(self.b.coverage)
        per_mod: dict[str, list[Bug]] = {}
        for path in self.p.module_files():
            e = self.p.tree[path]
            for bug in find_bugs(path, e.data, covered, rng):
                per_mod.setdefault(bug.modifier, []).append(bug)
        for v in per_mod.values():
            rng.shuffle(v)
        out: list[Bug] = []
        order = [m for m in ALL_MODIFIERS if m in per_mod]
        while any(per_mod.values()):
            for m in order:
                if per_mod[m]:
                    out.append(per_mod[m].pop())
        return out

    def combos(self, pool: list[Bug], n: int, rng: random.Random) -> list[tuple[Bug, ...]]:
        """Up to ``n`` combinations of 2-4 bugs in different functions whose edits do not
        overlap (a class-level change spans its methods: "overlapping edits" ended a
        project's synthesis before)."""
        out: list[tuple[Bug, ...]] = []
        for _ in range(n * 4):
            if len(out) >= n or len(pool) < 2:
                break
            k = rng.choice([2, 2, 3, 4])
            pick: list[Bug] = []
            for b in rng.sample(pool, min(len(pool), 12)):
                if all((b.func != x.func or b.path != x.path) and not _overlap(b, x)
                       for x in pick):
                    pick.append(b)
                if len(pick) >= k:
                    break
            if len(pick) >= 2:
                out.append(tuple(pick))
        return out

    # -------------------------------------------------------------- cards
    def _tests_for(self, bugs: tuple[Bug, ...]) -> tuple[list[str], list[str]]:
        files: set[str] = set()
        for b in bugs:
            for nid in self.b.coverage.get(b.key, []):
                files.add(nid.split("::", 1)[0])
        ids = sorted(i for f in files for i in self.by_file.get(f, []))
        return sorted(files), ids

    def _files(self, bugs: tuple[Bug, ...], keep: tuple[Bug, ...] | None = None
               ) -> dict[str, bytes]:
        by_path: dict[str, list[Any]] = {}
        for b in bugs if keep is None else keep:
            by_path.setdefault(b.path, []).extend(b.edits)
        return {p: apply_edits(self.p.tree[p].data, es) for p, es in by_path.items()}

    def build(self, cand: Candidate, acceptance: list[str], instruction: str,
              failing: int) -> TaskCard:
        from ..envs.repo_refactor import oracle_script
        from ..verify import oracle_call_count

        mutated = self._files(cand.bugs)
        hidden_files = sorted({a.split("::", 1)[0] for a in acceptance})
        tests = hidden_tests(self.p.tree, [self.names_rev[f] for f in hidden_files],
                             self.p.import_root, drop=self.b.flagged)
        originals = {p: self.p.tree[p].data.decode() for p in mutated}
        solution = oracle_script(originals, note="the reverse patch")
        n = len(cand.bugs)
        run_s = max(self.b.run_s, 1.0)
        mods = sorted({b.modifier for b in cand.bugs})
        card = TaskCard(
            id=f"synth_repo/{self.p.slug}-{cand.key[:10]}-v1", type="repo_refactor",
            horizon=horizon_for_steps(len(mutated) + 1), instruction=instruction,
            budget=Budget(max_steps=40, command_timeout_s=max(10.0, 3 * run_s),
                          episode_timeout_s=900.0),
            acceptance=Acceptance(tests=acceptance, protected=list(self.protected),
                                  runner="inprocess",
                                  test_timeout_s=round(max(30.0, 6 * run_s), 1)),
            difficulty=min(10, 2 * n - 1 + (1 if failing > 3 else 0)),
            tags=["synth", "synth_repo", self.p.name.lower(), *mods],
            split="heldout" if self.o.split == "heldout" else "train", template=f"synth_repo/{self.p.slug}", seed=self.o.seed)
        card.base_layers = [dict(self.p.tree)]
        card.workspace = {p: FileEntry(d, mode=self.p.tree[p].mode) for p, d in mutated.items()}
        card.tests = tests
        card.solution = solution
        calls = oracle_call_count(card)
        card.horizon = horizon_for_steps(calls)
        card.budget.max_steps = max(card.budget.max_steps, calls + 20)
        return card

    def partial_solution(self, cand: Candidate) -> str:
        from ..envs.repo_refactor import oracle_script

        revert = cand.bugs[: max(1, len(cand.bugs) // 2)]
        rest = tuple(b for b in cand.bugs if b not in revert)
        now = self._files(rest)
        files = {p: (now[p] if p in now else self.p.tree[p].data).decode()
                 for p in {b.path for b in revert}}
        return oracle_script(files, note="half of the reverse patch")

    def provisional(self, cand: Candidate) -> TaskCard | None:
        _files, ids = self._tests_for(cand.bugs)
        if not ids:
            return None
        try:
            for p in self._files(cand.bugs):
                self.p.tree[p].data.decode()
        except UnicodeDecodeError:
            return None
        return self.build(cand, ids, "(screening)", 0)

    # -------------------------------------------------------------- output
    def _share_layer(self, card_dir: Path) -> None:
        """Hard-link the card's base layer files to one copy per project (disk once)."""
        layer = card_dir / "layers" / "00"
        for f in layer.rglob("*"):
            if f.is_symlink() or not f.is_file():
                continue
            s = self.layer_store / f.relative_to(layer)
            try:
                if not s.exists():
                    s.parent.mkdir(parents=True, exist_ok=True)
                    os.link(f, s)
                elif not os.path.samefile(s, f) and filecmp.cmp(s, f, shallow=False) \
                        and s.stat().st_mode == f.stat().st_mode:
                    tmp = f.with_name(f".{f.name}.lnk")
                    os.link(s, tmp)
                    os.replace(tmp, f)
            except OSError:
                continue

    def write(self, cand: Candidate, card: TaskCard, failing: list[str],
              passing: list[str]) -> str:
        folder = f"{self.p.slug}-{cand.key[:10]}"
        save_card(card, self.out / folder)
        self._share_layer(self.out / folder)
        self.manifest.append({
            "card": folder, "id": card.id, "kind": "repo", "source": self.p.source,
            "project": self.p.name, "version": self.p.version,
            "modifiers": [b.modifier for b in cand.bugs],
            "functions": [f"{b.path}:{b.func}" for b in cand.bugs],
            "files": sorted({b.path for b in cand.bugs}), "difficulty": card.difficulty,
            "split": card.split, "fail_to_pass": len(failing), "pass_to_pass": len(passing)})
        return folder

    # -------------------------------------------------------------- the loop
    def run(self, progress: Progress | None = None,
            deadline_s: float | None = None) -> dict[str, Any]:
        t0 = time.perf_counter()
        past = [r for r in self.log.read() if r.get("project") == self.p.name
                and r.get("version") == self.p.version]
        done = {r["key"] for r in past}
        dedupe = {r.get("dedupe") for r in past if r.get("result") == "card"}
        cards_total = sum(1 for r in past if r.get("result") == "card")
        singles = self.singles()
        by_key = {bug_key((b,)): b for b in singles}
        pool = [by_key[r["key"]] for r in past if r.get("result") == "card"
                and r["key"] in by_key]
        rng = random.Random(f"combo|{self.o.seed}|{self.p.slug}|{len(past)}")
        new_records: list[dict[str, Any]] = []
        tried = 0
        queue: Iterator[Bug] = iter(singles)

        def want_more() -> bool:
            if deadline_s is not None and time.perf_counter() - t0 > deadline_s:
                return False
            if self.o.limit is not None and cards_total >= self.o.limit:
                return False
            return self.o.max_candidates is None or tried < self.o.max_candidates

        exhausted = False
        while want_more() and not exhausted:
            batch: list[Candidate] = []
            n_combo = round(self.o.batch * self.o.combo_share) if len(pool) >= 2 else 0
            for combo in self.combos(pool, n_combo, rng):
                k = bug_key(combo)
                if k not in done:
                    batch.append(Candidate(k, combo))
            size = self.o.batch
            if self.o.limit is not None:  # never more candidates than cards still wanted
                size = max(1, min(size, self.o.limit - cards_total))
            batch = batch[:size]
            while len(batch) < size:
                b = next(queue, None)
                if b is None:
                    exhausted = not batch or True
                    break
                k = bug_key((b,))
                if k not in done:
                    batch.append(Candidate(k, (b,)))
            if self.o.max_candidates is not None:
                batch = batch[: max(0, self.o.max_candidates - tried)]
            if not batch:
                break
            recs = self._process(batch, dedupe)
            for cand, rec in zip(batch, recs, strict=True):
                done.add(cand.key)
                tried += 1
                self.log.append(rec)
                new_records.append(rec)
                if rec["result"] == "card":
                    cards_total += 1
                    if len(cand.bugs) == 1:
                        pool.append(cand.bugs[0])
            if progress:
                progress(report(new_records, seconds=time.perf_counter() - t0,
                                extra={"cards_total": cards_total}))
            if exhausted and not (len(pool) >= 2 and self.o.combo_share > 0 and want_more()):
                break
            if exhausted:
                exhausted = False
                queue = iter(())
                if not self.combos(pool, 1, rng):
                    break
        secs = time.perf_counter() - t0
        return report(new_records, seconds=secs, extra={
            "project": self.p.name, "version": self.p.version, "source": self.p.source,
            "cards_total": cards_total, "baseline": {
                "stable": len(self.b.stable), "flaky": len(self.b.flaky),
                "failing": len(self.b.failing), "run_s": self.b.run_s,
                "covered_functions": len(self.b.coverage)},
            "single_candidates": len(singles), "out": str(self.out)})

    def _process(self, batch: list[Candidate], dedupe: set[Any]) -> list[dict[str, Any]]:
        t0 = time.perf_counter()
        recs: dict[str, dict[str, Any]] = {}

        def base(c: Candidate, result: str, reason: str | None) -> dict[str, Any]:
            return {"key": c.key, "result": result, "reason": reason,
                    "project": self.p.name, "version": self.p.version,
                    "modifiers": [b.modifier for b in c.bugs]}

        def scr(c: Candidate) -> tuple[Candidate, Any]:
            card = self.provisional(c)
            if card is None:
                return c, ("no_fail_to_pass", [], [], {})
            c.card = card
            return c, screen(card, backend=self.o.backend)

        with ThreadPoolExecutor(max_workers=max(1, self.o.workers)) as ex:
            screened = list(ex.map(scr, batch))
        finals: list[tuple[Candidate, TaskCard, list[str], list[str], str]] = []
        for c, (why, failing, passing, msgs) in screened:
            if why:
                recs[c.key] = base(c, "refused", why)
                if msgs.get("_evidence"):
                    recs[c.key]["evidence"] = msgs["_evidence"]
                continue
            dd = _sha(*sorted(failing), c.key)  # same failing set and same diff
            if dd in dedupe:
                recs[c.key] = base(c, "refused", "duplicate")
                continue
            dedupe.add(dd)
            banned = sorted(self.p.module_files())
            text = template_issue(self.p.name, failing, msgs, banned,
                                  seed=int(c.key[:8], 16))
            if self.o.writer:
                text, _why = rewrite_with_model(self.o.writer, text, banned)
            assert c.card is not None
            # graded: the fail-to-pass tests only. The reward is the pass rate of the
            # graded tests, so pass-to-pass tests among them would pay the untouched
            # workspace (and every exploit) P/(F+P); they are a synthesis gate instead
            # (docs/synthesis.md, "Why pass-to-pass tests are not graded").
            card = self.build(c, sorted(failing), text, len(failing))
            finals.append((c, card, failing, passing, dd))
        if finals:
            verdicts, vrep = validate_batch([f[1] for f in finals], backend=self.o.backend,
                                            workers=self.o.workers, exploits=self.o.exploits,
                                            executor=self.o.executor,
                                            ray_address=self.o.ray_address)
            for c, card, failing, passing, dd in finals:
                why = verdicts.get(card.id)
                if why is None and len(c.bugs) > 1 and truncated_passes(
                        card, self.partial_solution(c), backend=self.o.backend):
                    why = "truncated_oracle_passes"
                if why:
                    dedupe.discard(dd)
                    recs[c.key] = base(c, "refused", why)
                    if evidence(vrep, card.id):
                        recs[c.key]["evidence"] = evidence(vrep, card.id)
                    continue
                folder = self.write(c, card, failing, passing)
                rec = base(c, "card", None)
                rec.update(card=folder, dedupe=dd, fail_to_pass=len(failing),
                           pass_to_pass=len(passing))
                recs[c.key] = rec
        dt = (time.perf_counter() - t0) / max(1, len(batch))
        out = []
        for c in batch:
            r = recs[c.key]
            r["seconds"] = round(dt, 2)
            out.append(r)
        return out


def synth_repo(source: str, out: str | os.PathLike[str], opts: RepoOptions | None = None,
               *, progress: Progress | None = None,
               deadline_s: float | None = None) -> dict[str, Any]:
    """Synthesize validated cards from ``source`` into ``out``; returns the report.
    ``deadline_s``: stop starting batches after this many seconds."""
    from ..sandbox import ceiling_home

    opts = opts or RepoOptions()
    if opts.split not in ("train", "heldout"):
        raise ConfigError(f"unknown split {opts.split!r}", where="--split",
                          fix="use train or heldout")
    dest = Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    project = load_source(source, cache=ceiling_home() / "synth" / "sdists")
    baseline = load_or_run(project, dest / ".synth" / project.slug / "baseline.json",
                           backend=opts.backend)
    if not baseline.stable:
        why = ""
        if baseline.uncollectable:
            f, err = next(iter(sorted(baseline.uncollectable.items())))
            why = (f"; {len(baseline.uncollectable)} test file(s) do not import, e.g. "
                   f"{f}: {err}")
        raise ConfigError(f"none of {project.name}'s tests passes under the card grader "
                          f"({len(baseline.failing)} fail, {len(baseline.flaky)} flaky{why})",
                          where=source, fix="pick a project whose tests pass with plain "
                          "pytest and no conftest fixtures (a missing test dependency: pip "
                          "install it next to ceiling and add it to CEILING_RUNTIME_PACKAGES, "
                          "docs/sandbox.md)")
    return RepoSynth(project, baseline, dest, opts).run(progress, deadline_s)
