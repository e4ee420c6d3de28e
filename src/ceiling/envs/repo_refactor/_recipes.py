"""Function recipes: small pure Python functions with named mutation points.

A recipe draws constants and input cases from the rng and returns a :class:`FnSpec`: the
correct source of one ``def`` and, per mutation kind, the source with that bug injected.
Mutation kinds: ``off_by_one``, ``wrong_operator``, ``wrong_constant``, ``swapped_args``,
``wrong_comparison``. Expected outputs are never written by hand: the generators import the
rendered modules and call them (see ``_repo.call_all``), so a case and its answer cannot
disagree. :func:`draw` retries a recipe until every requested mutant is told apart from
the correct function by at least one of the drawn cases.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MUTATIONS = ("off_by_one", "wrong_operator", "wrong_constant", "swapped_args",
             "wrong_comparison")


@dataclass
class FnSpec:
    name: str
    params: tuple[str, ...]
    source: str  # the correct ``def``
    mutants: dict[str, str] = field(default_factory=dict)  # kind -> buggy ``def``
    cases: list[tuple[Any, ...]] = field(default_factory=list)  # argument tuples


def _ints(rng: random.Random, n: int, lo: int = -9, hi: int = 40) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _window_sums(rng: random.Random, n: str) -> FnSpec:
    src = (f"def {n}(values, width):\n"
           f'    """Sums of every run of `width` consecutive values, in order."""\n'
           f"    return [sum(values[i:i + width]) for i in range(len(values) - width + 1)]\n")
    cases = [(_ints(rng, rng.randint(5, 9)), rng.randint(2, 4)) for _ in range(5)]
    return FnSpec(n, ("values", "width"), src, {
        "off_by_one": src.replace("len(values) - width + 1", "len(values) - width"),
        "wrong_operator": src.replace("i:i + width", "i:i - width"),
    }, cases)


def _discounted_total(rng: random.Random, n: str) -> FnSpec:
    src = (f"def {n}(prices, quantities, discount_pct):\n"
           f'    """Sum of price * quantity, less `discount_pct` percent, rounded to cents."""\n'
           f"    total = 0\n"
           f"    for price, qty in zip(prices, quantities):\n"
           f"        total += price * qty\n"
           f"    return round(total * (1 - discount_pct / 100), 2)\n")
    cases = []
    for _ in range(5):
        k = rng.randint(2, 5)
        cases.append(([rng.randint(1, 90) for _ in range(k)], [rng.randint(1, 9) for _ in range(k)],
                      rng.choice((5, 10, 15, 20, 25))))
    return FnSpec(n, ("prices", "quantities", "discount_pct"), src, {
        "wrong_operator": src.replace("price * qty", "price + qty"),
        "wrong_constant": src.replace("discount_pct / 100", "discount_pct / 1000"),
        "off_by_one": src.replace("(1 - discount_pct / 100)", "(1 - (discount_pct + 1) / 100)"),
    }, cases)


def _compound(rng: random.Random, n: str) -> FnSpec:
    src = (f"def {n}(principal, rate_pct, years):\n"
           f'    """Value of `principal` after `years` of growth at `rate_pct` percent a year."""\n'
           f"    value = principal\n"
           f"    for _ in range(years):\n"
           f"        value = value * (1 + rate_pct / 100)\n"
           f"    return round(value, 2)\n")
    cases = [(rng.randint(100, 5000), rng.choice((2, 3, 4, 5, 7)), rng.randint(1, 6))
             for _ in range(5)]
    return FnSpec(n, ("principal", "rate_pct", "years"), src, {
        "off_by_one": src.replace("range(years)", "range(years - 1)"),
        "wrong_operator": src.replace("(1 + rate_pct / 100)", "(1 - rate_pct / 100)"),
        "wrong_constant": src.replace("rate_pct / 100", "rate_pct / 10"),
    }, cases)


def _count_above(rng: random.Random, n: str) -> FnSpec:
    src = (f"def {n}(values, threshold):\n"
           f'    """How many values are strictly greater than `threshold`."""\n'
           f"    count = 0\n"
           f"    for v in values:\n"
           f"        if v > threshold:\n"
           f"            count += 1\n"
           f"    return count\n")
    cases = []
    for _ in range(5):
        vals = _ints(rng, rng.randint(4, 8), 0, 20)
        cases.append((vals, rng.choice(vals)))
    return FnSpec(n, ("values", "threshold"), src, {
        "wrong_comparison": src.replace("v > threshold", "v >= threshold"),
        "off_by_one": src.replace("count = 0", "count = 1"),
        "swapped_args": src.replace("v > threshold", "threshold > v"),
    }, cases)


def _clamp_scaled(rng: random.Random, n: str) -> FnSpec:
    f = rng.randint(2, 9)
    src = (f"def {n}(value, low, high):\n"
           f'    """`value` clamped into [low, high], times {f}."""\n'
           f"    return max(low, min(high, value)) * {f}\n")
    cases = []
    for _ in range(5):
        lo = rng.randint(-5, 5)
        hi = lo + rng.randint(3, 12)
        cases.append((rng.randint(lo - 6, hi + 6), lo, hi))
    return FnSpec(n, ("value", "low", "high"), src, {
        "swapped_args": src.replace("max(low, min(high, value))", "max(high, min(low, value))"),
        "wrong_constant": src.replace(f"value)) * {f}", f"value)) * {f + 1}"),
        "wrong_operator": src.replace(f"value)) * {f}", f"value)) + {f}"),
    }, cases)


def _percent_change(rng: random.Random, n: str) -> FnSpec:
    src = (f"def {n}(old, new):\n"
           f'    """Percentage change from `old` to `new`, rounded to 2 places."""\n'
           f"    return round((new - old) / old * 100, 2)\n")
    cases = [(rng.randint(10, 400), rng.randint(10, 400)) for _ in range(5)]
    return FnSpec(n, ("old", "new"), src, {
        "swapped_args": src.replace("(new - old) / old", "(old - new) / new"),
        "wrong_operator": src.replace("(new - old)", "(new + old)"),
        "wrong_constant": src.replace("* 100", "* 10"),
    }, cases)


def _chunk_sums(rng: random.Random, n: str) -> FnSpec:
    src = (f"def {n}(values, size):\n"
           f'    """Sum of each consecutive chunk of `size` values (the last may be shorter)."""\n'
           f"    return [sum(values[i:i + size]) for i in range(0, len(values), size)]\n")
    cases = [(_ints(rng, rng.randint(5, 11)), rng.randint(2, 4)) for _ in range(5)]
    return FnSpec(n, ("values", "size"), src, {
        "off_by_one": src.replace("values[i:i + size]", "values[i:i + size + 1]"),
        "wrong_constant": src.replace("len(values), size)", "len(values), 2)"),
    }, cases)


def _label_grade(rng: random.Random, n: str) -> FnSpec:
    gap = rng.choice((10, 15, 20, 25))
    src = (f"def {n}(score, pass_mark):\n"
           f'    """Grade: distinction at pass_mark + {gap} or more, pass at pass_mark or'
           f' more, else fail."""\n'
           f"    if score >= pass_mark + {gap}:\n"
           f'        return "distinction"\n'
           f"    if score >= pass_mark:\n"
           f'        return "pass"\n'
           f'    return "fail"\n')
    cases = []
    for _ in range(3):
        pm = rng.randint(30, 60)
        cases += [(pm, pm), (pm + gap, pm), (pm - rng.randint(1, 9), pm)]
    return FnSpec(n, ("score", "pass_mark"), src, {
        "wrong_comparison": src.replace("if score >= pass_mark:", "if score > pass_mark:"),
        "wrong_constant": src.replace(f"pass_mark + {gap}:", f"pass_mark + {gap + 5}:"),
        "swapped_args": src.replace("if score >= pass_mark:", "if pass_mark >= score:"),
    }, cases)


def _average_gap(rng: random.Random, n: str) -> FnSpec:
    src = (f"def {n}(values):\n"
           f'    """Mean difference between consecutive values, rounded to 3 places."""\n'
           f"    gaps = [values[i + 1] - values[i] for i in range(len(values) - 1)]\n"
           f"    return round(sum(gaps) / len(gaps), 3)\n")
    cases = [(_ints(rng, rng.randint(4, 8), 0, 60),) for _ in range(5)]
    return FnSpec(n, ("values",), src, {
        "off_by_one": src.replace("range(len(values) - 1)", "range(len(values) - 2)"),
        "swapped_args": src.replace("values[i + 1] - values[i]", "values[i] - values[i + 1]"),
        "wrong_operator": src.replace("sum(gaps) / len(gaps)", "sum(gaps) * len(gaps)"),
    }, cases)


def _minimum_fee(rng: random.Random, n: str) -> FnSpec:
    m = rng.choice((2, 3, 5, 7))
    src = (f"def {n}(amount, rate_pct):\n"
           f'    """Fee of `rate_pct` percent of `amount`, never less than {m}."""\n'
           f"    return max({m}, round(amount * rate_pct / 100, 2))\n")
    cases = [(rng.choice((rng.randint(10, 90), rng.randint(200, 2000))), rng.randint(1, 9))
             for _ in range(6)]
    return FnSpec(n, ("amount", "rate_pct"), src, {
        "wrong_constant": src.replace(f"max({m},", f"max({m * 10},"),
        "wrong_operator": src.replace(f"max({m},", f"min({m},"),
        "off_by_one": src.replace("rate_pct / 100", "(rate_pct + 1) / 100"),
    }, cases)


RECIPES: dict[str, Callable[[random.Random, str], FnSpec]] = {
    "window_sums": _window_sums, "discounted_total": _discounted_total, "compound": _compound,
    "count_above": _count_above, "clamp_scaled": _clamp_scaled,
    "percent_change": _percent_change, "chunk_sums": _chunk_sums, "label_grade": _label_grade,
    "average_gap": _average_gap, "minimum_fee": _minimum_fee,
}


def _run(src: str, name: str, args: tuple[Any, ...]) -> Any:
    ns: dict[str, Any] = {}
    exec(compile(src, "<recipe>", "exec"), ns)  # noqa: S102 (generator-owned code)
    try:
        return ns[name](*args)
    except Exception as e:  # noqa: BLE001 (a crashing mutant is told apart too)
        return f"<{type(e).__name__}>"


def distinguishes(spec: FnSpec, kind: str) -> bool:
    """Whether at least one of ``spec.cases`` tells the ``kind`` mutant from the original."""
    return any(repr(_run(spec.source, spec.name, c)) != repr(_run(spec.mutants[kind], spec.name, c))
               for c in spec.cases)


def draw(rng: random.Random, name: str, *, recipe: str | None = None,
         need: tuple[str, ...] = ()) -> FnSpec:
    """A spec from ``recipe`` (or a random one offering every kind in ``need``) whose cases
    tell each needed mutant apart from the original."""
    pool = [k for k, f in sorted(RECIPES.items())
            if recipe in (None, k)]
    for _ in range(50):
        key = rng.choice(pool)
        spec = RECIPES[key](rng, name)
        if all(k in spec.mutants and distinguishes(spec, k) for k in need):
            return spec
    raise RuntimeError(f"no recipe offers mutations {need} (recipe={recipe})")


def offering(kind: str) -> list[str]:
    """Recipe names that have a ``kind`` mutant (the generator checks on a probe draw)."""
    probe = random.Random(0)
    return [k for k, f in sorted(RECIPES.items()) if kind in f(probe, "f").mutants]
