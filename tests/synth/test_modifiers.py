"""Bug modifiers: every kind finds a site, edits only its node, and changes the AST."""

from __future__ import annotations

import ast
import random

import pytest

from ceiling.synth._modifiers import (
    ALL_MODIFIERS,
    CLASS_MODIFIERS,
    MODIFIERS,
    Source,
    apply_edits,
    complexity,
    find_bugs,
)

SAMPLE = b'''"""module doc"""
import contextlib


class Base:
    pass


class Box(Base):
    def size(self, items):  # a comment that must survive
        total = 0
        for i in range(len(items)):
            if items[i] > 0 and i % 2 == 0 or items[i] is None:
                total += items[i] * 2 - 1
            else:
                total = total - 1
        if total < 0:
            raise ValueError("negative")
        with contextlib.suppress(KeyError):
            total = total + 3 + 4
        head = items[1:3]
        count = len(head)
        while count > 0:
            count -= 1
        return total

    def other(self):
        return 1
'''


def _fn(tree: ast.Module, name: str) -> ast.AST:
    return next(n for n in ast.walk(tree) if getattr(n, "name", None) == name)


def test_at_least_twelve_kinds() -> None:
    assert len(ALL_MODIFIERS) >= 12
    assert len(set(ALL_MODIFIERS)) == len(ALL_MODIFIERS)


@pytest.mark.parametrize("name", sorted(MODIFIERS))
def test_each_function_modifier_finds_a_valid_site(name: str) -> None:
    tree = ast.parse(SAMPLE)
    src = Source("box.py", SAMPLE)
    sites = MODIFIERS[name](src, _fn(tree, "size"))
    assert sites, f"{name} found no site"
    for edits in sites:
        new = apply_edits(SAMPLE, edits)
        assert new != SAMPLE
        assert ast.dump(ast.parse(new)) != ast.dump(tree), f"{name} made a no-op change"
        # only the edited bytes differ: the comment and the other method are untouched
        assert b"# a comment that must survive" in new
        assert b"    def other(self):\n        return 1\n" in new


@pytest.mark.parametrize("name", sorted(CLASS_MODIFIERS))
def test_class_modifiers(name: str) -> None:
    tree = ast.parse(SAMPLE)
    src = Source("box.py", SAMPLE)
    sites = CLASS_MODIFIERS[name](src, _fn(tree, "Box"))
    assert sites
    new = apply_edits(SAMPLE, sites[0])
    ast.parse(new)
    assert new != SAMPLE


def test_specific_edits() -> None:
    src = Source("m.py", b"def f(a, b):\n    if a < b:\n        return a - b\n    return b\n")
    fn = ast.parse(src.data).body[0]
    flip = MODIFIERS["flip_comparison"](src, fn)
    assert apply_edits(src.data, flip[0]) == src.data.replace(b"a < b", b"a <= b")
    swap = MODIFIERS["swap_operands"](src, fn)
    outs = {apply_edits(src.data, s) for s in swap}
    assert src.data.replace(b"a - b", b"b - a") in outs
    assert src.data.replace(b"a < b", b"b < a") in outs


def test_find_bugs_respects_coverage_and_complexity() -> None:
    tree = ast.parse(SAMPLE)
    size = _fn(tree, "size")
    assert complexity(size) >= 3
    key = f"box.py:{size.lineno}"  # type: ignore[attr-defined]
    bugs = find_bugs("box.py", SAMPLE, {key}, random.Random(0))
    assert bugs and {b.key for b in bugs} == {key}
    assert {b.func for b in bugs} <= {"Box.size", "Box"}
    assert len({b.modifier for b in bugs}) >= 12
    assert find_bugs("box.py", SAMPLE, set(), random.Random(0)) == []


def test_overlapping_edits_are_refused() -> None:
    from ceiling.synth._modifiers import Edit

    with pytest.raises(ValueError):
        apply_edits(b"abcdef", [Edit("x", 0, 3, b"X"), Edit("x", 2, 4, b"Y")])
