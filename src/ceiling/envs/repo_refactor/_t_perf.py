"""Template ``repo_refactor/make-fast``: make slow functions fast, measured by counting calls.

Each slow function takes a list of items and an expensive scoring callable and calls it
O(n²) times. The hidden tests run each function in the grader's subject with a scorer made
by ``subject.remote``: every call goes back to the grader, which counts it and answers from
a score table the workspace never sees (drawn from the card's secret-keyed rng, on inputs
other than the visible tests'), so the count cannot be reset or skipped from the
workspace and the scores cannot be recomputed without calling the scorer. They require at
most one call per item, plus exact results (ties keep input order) — speed is never
measured with a clock.
Train: the scorer is a plain callable ``score(item)``; held out: it is a method of a
catalogue object (``source.weight(item)``). Difficulty = number of slow functions
(1; 3; 10–12 across modules). Infeasible: the instruction demands fewer scorer calls than
items, while every result depends on every item's score.
"""

from __future__ import annotations

import random
from typing import Any

from ...cards import TaskCard
from .._registry import Template, Variant, register
from . import _kit
from ._repo import module_text

# (slow source, fast source, extra-args generator); NAME and SCORE are substituted.
ALGOS: dict[str, tuple[str, str]] = {
    "top_k": ('''def NAME(items, SCOREP, k):
    """The k items with the highest score, best first; ties keep input order."""
    chosen = []
    remaining = list(items)
    for _ in range(min(k, len(remaining))):
        best = remaining[0]
        for item in remaining[1:]:
            if SCORE(item) > SCORE(best):
                best = item
        chosen.append(best)
        remaining.remove(best)
    return chosen
''', '''def NAME(items, SCOREP, k):
    """The k items with the highest score, best first; ties keep input order."""
    scored = [(SCORE(item), i, item) for i, item in enumerate(items)]
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [item for _, _, item in scored[:k]]
'''),
    "rank": ('''def NAME(items, SCOREP):
    """All items ordered by ascending score; ties keep input order."""
    out = list(items)
    for i in range(len(out)):
        for j in range(len(out) - 1 - i):
            if SCORE(out[j]) > SCORE(out[j + 1]):
                out[j], out[j + 1] = out[j + 1], out[j]
    return out
''', '''def NAME(items, SCOREP):
    """All items ordered by ascending score; ties keep input order."""
    return sorted(items, key=SCORE)
'''),
    "count_pairs": ('''def NAME(items, SCOREP, target):
    """How many pairs i < j have scores adding up to `target`."""
    count = 0
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            if SCORE(items[i]) + SCORE(items[j]) == target:
                count += 1
    return count
''', '''def NAME(items, SCOREP, target):
    """How many pairs i < j have scores adding up to `target`."""
    seen = {}
    count = 0
    for item in items:
        s = SCORE(item)
        count += seen.get(target - s, 0)
        seen[s] = seen.get(s, 0) + 1
    return count
'''),
    "dedupe": ('''def NAME(items, SCOREP):
    """Items in order, dropping any whose score equals an earlier kept item's score."""
    kept = []
    for item in items:
        if all(SCORE(item) != SCORE(other) for other in kept):
            kept.append(item)
    return kept
''', '''def NAME(items, SCOREP):
    """Items in order, dropping any whose score equals an earlier kept item's score."""
    kept = []
    seen = set()
    for item in items:
        s = SCORE(item)
        if s not in seen:
            seen.add(s)
            kept.append(item)
    return kept
'''),
    "widest_gap": ('''def NAME(items, SCOREP):
    """The largest difference between the scores of any two items (0 for < 2 items)."""
    best = 0
    for a in items:
        for b in items:
            best = max(best, SCORE(a) - SCORE(b))
    return best
''', '''def NAME(items, SCOREP):
    """The largest difference between the scores of any two items (0 for < 2 items)."""
    scores = [SCORE(item) for item in items]
    return max(scores) - min(scores) if len(scores) > 1 else 0
'''),
}
SIZES = {1: (1, 1, 1), 2: (3, 3, 2), 3: (10, 12, 5)}  # (min fns, max fns, modules)
WORDS = ("amber", "basil", "cedar", "dune", "ember", "fern", "garnet", "hazel", "iris", "jasper",
         "kale", "lotus", "maple", "nectar", "olive", "pepper", "quince", "rowan", "sage",
         "thyme", "umber", "violet", "walnut", "yarrow", "zinnia", "acorn", "birch", "clover")


def _style(src: str, heldout: bool) -> str:
    if heldout:
        return src.replace("SCOREP", "source").replace("SCORE", "source.weight")
    return src.replace("SCOREP", "score").replace("SCORE", "score")


def _extra(algo: str, rng: random.Random, scores: list[int]) -> tuple[Any, ...]:
    if algo == "top_k":
        return (rng.randint(2, 5),)
    if algo == "count_pairs":
        return (rng.choice(scores) + rng.choice(scores),)
    return ()


def _expected(fast_src: str, name: str, items: list[str], table: dict[str, int],
              extra: tuple[Any, ...], heldout: bool) -> Any:
    ns: dict[str, Any] = {}
    exec(compile(fast_src, "<fast>", "exec"), ns)  # noqa: S102 (generator-owned code)

    class Source:
        def weight(self, item: str) -> int:
            return table[item]

    scorer: Any = Source() if heldout else table.__getitem__
    return ns[name](list(items), scorer, *extra)


_HEAD = '''

RUNNER = """
import importlib


class _Source:
    def __init__(self, score):
        self._score = score

    def weight(self, item):
        return self._score(item)


def run(mod, fn, items, score, extra, method):
    func = getattr(importlib.import_module(mod), fn)
    return func(list(items), _Source(score) if method else score, *extra)
"""


def check(subject, mod, fn, cases, max_calls):
    """Each case: the result is exact and the remote scorer was called at most
    max_calls(len(items)) times (the scorer stops answering past the limit)."""
    subject.define(RUNNER)
    for items, table, extra, want in cases:
        limit = max_calls(len(items))
        seen = []

        def score(item):
            seen.append(item)
            if len(seen) > limit:
                raise RuntimeError(f"scorer called more than {limit} times")
            return table[item]

        got = outcome(subject, "__ceiling__:run", mod, fn, items, subject.remote(score),
                      list(extra), METHOD)
        assert len(seen) <= limit, (
            f"{fn} called the scorer more than {limit} times for {len(items)} items")
        assert same(got, want), f"{fn}: returned {got!r}, expected {want!r}"
'''


@register
class MakeFast(Template):
    family = "repo_refactor"
    name = "make-fast"
    summary = "Make O(n^2) functions call an expensive scorer at most once per item."
    difficulties = (1, 2, 3)
    horizons = {1: "short", 2: "medium", 3: "long"}  # noqa: RUF012
    tags = ("performance", "refactor")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        heldout = variant == "heldout"
        infeasible = variant == "infeasible"
        lo, hi, nmods = SIZES[difficulty]
        taken: set[str] = set()
        pkg = _kit.package_name(rng)
        mods = _kit.module_names(rng, nmods, taken | {pkg})
        nfns = rng.randint(lo, hi)
        fns: list[tuple[str, str, str]] = []  # (module, name, algo)
        algos = list(ALGOS)
        for i in range(nfns):
            fns.append((mods[i % nmods], _kit.ident(rng, taken), algos[rng.randrange(len(algos))]))
        before: dict[str, str] = {f"{pkg}/__init__.py": f'"""{pkg}: catalogue analytics."""\n'}
        after = dict(before)
        hidden_cases: list[str] = []
        vis_lines = []
        for mod in mods:
            mine = [(n, a) for m, n, a in fns if m == mod]
            if not mine:
                continue
            doc = f"{mod.capitalize()} analytics. Scoring an item is expensive (a remote lookup)."
            before[f"{pkg}/{mod}.py"] = module_text(
                doc, [], [_style(ALGOS[a][0], heldout).replace("NAME", n) for n, a in mine])
            after[f"{pkg}/{mod}.py"] = module_text(
                doc, [], [_style(ALGOS[a][1], heldout).replace("NAME", n) for n, a in mine])
            for n, a in mine:
                fast = _style(ALGOS[a][1], heldout).replace("NAME", n)
                cases = []
                # the first case is shown in the visible tests; the hidden tests use the
                # other two (fresh items and scores)
                for size in (rng.randint(4, 7), rng.randint(4, 7), rng.randint(25, 40)):
                    items = rng.sample(WORDS, min(size, len(WORDS))) if size <= len(WORDS) else []
                    if size > len(WORDS):
                        items = [f"{rng.choice(WORDS)}-{i}" for i in range(size)]
                    table = {it: rng.randint(0, size // 2 + 3) for it in items}
                    extra = _extra(a, rng, list(table.values()))
                    cases.append((items, table, extra,
                                  _expected(fast, n, items, table, extra, heldout)))
                hidden_cases.append(f"\n\ndef test_fast_{n}(subject):\n"
                                    f"    check(subject, {f'{pkg}.{mod}'!r}, {n!r}, "
                                    f"{cases[1:]!r}, LIMIT)\n")
                items, table, extra, want = cases[0]
                vis_lines.append((mod, n, items, table, extra, want))
        limit = "lambda n: n // 2" if infeasible else "lambda n: n"
        hidden = (_kit.TEST_PRELUDE + _HEAD + f"\n\nLIMIT = {limit}\nMETHOD = {heldout!r}\n"
                  + "".join(hidden_cases))
        tname = f"tests/test_{pkg}.py"
        vis = [f'"""Correctness tests for {pkg}. Run: python3 -m pytest -q tests"""',
               "import pathlib", "import sys", "",
               "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))", ""]
        vis += [f"import {pkg}.{m}  # noqa: E402" for m in sorted({m for m, *_ in vis_lines})]
        for mod, n, items, table, extra, want in vis_lines:
            scorer = (f"type('S', (), {{'weight': lambda self, x: {table!r}[x]}})()" if heldout
                      else f"{table!r}.__getitem__")
            vis += ["", "", f"def test_{n}():",
                    f"    assert {pkg}.{mod}.{n}({items!r}, {scorer}, *{extra!r}) == {want!r}"]
        workspace = dict(before)
        workspace[tname] = "\n".join(vis) + "\n"
        first = f"{pkg}/{fns[0][0]}.py"
        fault, chmod = _kit.fault_for(rng, variant, first)
        names = ", ".join(f"`{m}.{n}`" for m, n, _ in fns)
        scorer_word = "`source.weight(item)`" if heldout else "`score(item)`"
        budget = "at most half as many scorer calls as there are items" if infeasible else \
            "at most ONE scorer call per item"
        instruction = (
            f"In the package `{pkg}`, these functions are too slow: {names}. Calling the "
            f"scorer ({scorer_word}) is expensive, and they call it O(n^2) times. Rewrite "
            f"them so that each makes {budget} (it is counted), with exactly the same "
            f"results as now, including the order of ties. Keep the names and signatures. "
            f"The visible tests in `tests/` must keep passing (do not edit them). Submit "
            f"when done.")
        changed = {p: x for p, x in after.items() if before.get(p) != x}
        return _kit.assemble(
            self, difficulty=difficulty, variant=variant, instruction=instruction,
            workspace=workspace, tests={"test_task.py": hidden},
            test_ids=_kit.test_ids("test_task.py", hidden),
            solution=_kit.GIVE_UP if infeasible else _kit.oracle_script(
                changed, chmod=chmod, note="one scorer call per item"),
            protected=[tname], faults=[fault] if fault else [],
            infeasible_reason=("every result depends on every item's score, so each item "
                               "must be scored at least once: fewer calls than items is "
                               "impossible") if infeasible else None,
            tags=[f"structure:{'method-scorer' if heldout else 'callable-scorer'}",
                  f"functions:{nfns}"])
