"""Procedural bug modifiers: small AST-guided edits to a covered function's source.

After SWE-smith's procedural modifiers (``swesmith/bug_gen/procedural``), re-implemented
on the standard library's :mod:`ast` with **text edits**: a modifier finds a site (a node)
in a function and replaces only that node's bytes (or that statement's lines), so the rest
of the file, comments and formatting included, stays byte-identical and the diff points at
nothing but the bug. Every result must parse and differ from the original as an AST.

:data:`MODIFIERS` (name -> what it does):

=====================  =============================================================
``change_operator``    a binary or augmented operator changes (``+``->``-``, ``*``->``/``...)
``flip_comparison``    a comparison changes (``<``->``<=``, ``==``->``!=``, ``in``->``not in``)
``swap_operands``      the operands of a non-commutative operation or comparison swap
``change_constant``    an integer constant is off by one
``break_chain``        the middle operand of an operator chain is dropped (``a+b+c``->``a+c``)
``swap_bool_op``       ``and`` <-> ``or``
``invert_if_else``     an if's and its else's bodies swap
``remove_conditional`` an ``if`` without ``else`` is removed
``remove_assign``      an assignment is removed
``remove_loop``        a ``for``/``while`` loop is removed
``remove_wrapper``     a ``with``/``try`` keeps only its body
``shuffle_lines``      two adjacent statements swap
``off_by_one``         a ``range()`` stop or a slice bound moves by one
``remove_raise``       a ``raise`` is removed
``wrong_return``       a ``return X`` returns ``None``
``remove_method``      a class loses a method
``remove_base``        a class loses a base class
=====================  =============================================================

Eligibility follows SWE-smith: a function's complexity (1 + branches and loops + boolean
operands + except handlers + comparison operators) must reach :data:`MIN_COMPLEXITY`.
Limits: statement-level modifiers only touch statements that own their lines (no ``;``);
decorators and nested functions are left alone by the expression modifiers' parents.
"""

from __future__ import annotations

import ast
import itertools
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

MIN_COMPLEXITY = 3


@dataclass(frozen=True)
class Edit:
    """Replace bytes ``[start, end)`` of file ``path`` with ``text``."""

    path: str
    start: int
    end: int
    text: bytes


@dataclass(frozen=True)
class Bug:
    """One injected bug: which modifier, where (file, function, coverage key), the edits."""

    modifier: str
    path: str
    func: str  # qualified name, e.g. "Foo.bar"
    key: str  # "relpath:first line" (the coverage key of the function)
    edits: tuple[Edit, ...]


class Source:
    """A module's bytes with line offsets (ast columns are UTF-8 byte offsets)."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self.data = data
        self.lines = data.splitlines(keepends=True)
        self.starts = [0]
        for ln in self.lines:
            self.starts.append(self.starts[-1] + len(ln))

    def off(self, lineno: int, col: int) -> int:
        return self.starts[lineno - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.off(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.off(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def seg(self, node: ast.AST) -> bytes:
        a, b = self.span(node)
        return self.data[a:b]

    def line_range(self, first: int, last: int) -> tuple[int, int]:
        """Byte range of whole lines ``first..last`` (1-based, inclusive)."""
        return self.starts[first - 1], self.starts[last]

    def indent(self, lineno: int) -> bytes:
        ln = self.lines[lineno - 1]
        return ln[:len(ln) - len(ln.lstrip(b" \t"))]


# ----------------------------------------------------------------------------- helpers

def complexity(fn: ast.AST) -> int:
    c = 1
    for n in ast.walk(fn):
        if isinstance(n, (ast.If, ast.For, ast.While, ast.AsyncFor, ast.IfExp, ast.comprehension)):
            c += 1
        elif isinstance(n, ast.BoolOp):
            c += len(n.values) - 1
        elif isinstance(n, ast.ExceptHandler):
            c += 1
        elif isinstance(n, ast.Compare):
            c += len(n.ops)
    return c


def _own_lines(src: Source, st: ast.stmt) -> bool:
    first = min([st.lineno] + [d.lineno - 1 for d in getattr(st, "decorator_list", [])]) \
        if getattr(st, "decorator_list", None) else st.lineno
    head = src.lines[first - 1][:st.col_offset if first == st.lineno else 0]
    end = st.end_lineno or st.lineno
    tail = src.lines[end - 1][st.end_col_offset or 0:].strip()
    return head.strip() == b"" and (tail == b"" or tail.startswith(b"#"))


def _first_line(st: ast.stmt) -> int:
    decs = getattr(st, "decorator_list", None) or []
    return min([st.lineno] + [d.lineno for d in decs])


def _blocks(fn: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every statement list inside ``fn`` (its body and nested blocks), not descending into
    nested function or class definitions."""
    stack: list[ast.AST] = [fn]
    while stack:
        node = stack.pop()
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
            if isinstance(block, list):
                stack.extend(st for st in block if not isinstance(
                    st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            stack.extend(node.handlers)  # type: ignore[attr-defined]
        if isinstance(node, ast.Match):
            stack.extend(node.cases)


def _exprs(fn: ast.AST) -> Iterator[ast.AST]:
    """Expression nodes inside ``fn`` (not inside nested defs, decorators or defaults)."""
    body = getattr(fn, "body", [])
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _remove_stmt(src: Source, block: list[ast.stmt], st: ast.stmt) -> Edit | None:
    if not _own_lines(src, st) or _is_docstring(block, st):
        return None
    a, b = src.line_range(_first_line(st), st.end_lineno or st.lineno)
    real = [s for s in block if not _is_docstring(block, s)]
    text = src.indent(st.lineno) + b"pass\n" if len(real) == 1 else b""
    return Edit(src.path, a, b, text)


def _is_docstring(block: list[ast.stmt], st: ast.stmt) -> bool:
    return (st is block[0] and isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
            and isinstance(st.value.value, str))


def _gap(src: Source, left: ast.AST, right: ast.AST) -> tuple[int, int, bytes]:
    a = src.off(left.end_lineno, left.end_col_offset)  # type: ignore[attr-defined]
    b = src.off(right.lineno, right.col_offset)  # type: ignore[attr-defined]
    return a, b, src.data[a:b]


def _replace_token(src: Source, a: int, gap: bytes, pattern: bytes, new: bytes) -> Edit | None:
    m = re.search(pattern, gap)
    if not m:
        return None
    return Edit(src.path, a + m.start(), a + m.end(), new)


Sites = list[tuple[Edit, ...]]

# ----------------------------------------------------------------------------- modifiers

_BINOPS: dict[type, tuple[bytes, bytes]] = {
    ast.Add: (rb"(?<![+=*/<>!%&|^-])\+(?![+=])", b"-"),
    ast.Sub: (rb"(?<![=*/<>!%&|^+-])-(?![-=>])", b"+"),
    ast.Mult: (rb"(?<![*])\*(?![*=])", b"/"),
    ast.Div: (rb"(?<![/])/(?![/=])", b"*"),
    ast.FloorDiv: (rb"//(?!=)", b"/"),
    ast.Mod: (rb"%(?!=)", b"//"),
    ast.Pow: (rb"\*\*(?!=)", b"*"),
    ast.LShift: (rb"<<(?!=)", b">>"),
    ast.RShift: (rb">>(?!=)", b"<<"),
    ast.BitAnd: (rb"&(?!=)", b"|"),
    ast.BitOr: (rb"\|(?!=)", b"&"),
    ast.BitXor: (rb"\^(?!=)", b"&"),
}
_AUG = {ast.Add: (rb"\+=", b"-="), ast.Sub: (rb"-=", b"+="), ast.Mult: (rb"\*=", b"/="),
        ast.Div: (rb"/=", b"*="), ast.BitOr: (rb"\|=", b"&="), ast.BitAnd: (rb"&=", b"|=")}


def change_operator(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for n in _exprs(fn):
        if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
            if isinstance(n.op, ast.Mod) and isinstance(n.left, (ast.Constant, ast.JoinedStr)) \
                    and isinstance(getattr(n.left, "value", None), (str, bytes)):
                continue  # "%s" % x formatting
            a, _b, gap = _gap(src, n.left, n.right)
            pat, new = _BINOPS[type(n.op)]
            e = _replace_token(src, a, gap, pat, new)
            if e:
                out.append((e,))
        elif isinstance(n, ast.AugAssign) and type(n.op) in _AUG:
            a, _b, gap = _gap(src, n.target, n.value)
            pat, new = _AUG[type(n.op)]
            e = _replace_token(src, a, gap, pat, new)
            if e:
                out.append((e,))
    return out


_CMP: dict[type, tuple[bytes, bytes]] = {
    ast.Lt: (rb"<(?![<=])", b"<="), ast.LtE: (rb"<=", b"<"), ast.Gt: (rb"(?<![-])>(?![>=])", b">="),
    ast.GtE: (rb">=", b">"), ast.Eq: (rb"==", b"!="), ast.NotEq: (rb"!=", b"=="),
    ast.In: (rb"\bin\b", b"not in"), ast.NotIn: (rb"\bnot\s+in\b", b"in"),
    ast.Is: (rb"\bis\b(?!\s+not\b)", b"is not"), ast.IsNot: (rb"\bis\s+not\b", b"is"),
}


def flip_comparison(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for n in _exprs(fn):
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _CMP:
            a, _b, gap = _gap(src, n.left, n.comparators[0])
            pat, new = _CMP[type(n.ops[0])]
            e = _replace_token(src, a, gap, pat, new)
            if e:
                out.append((e,))
    return out


_NONCOMM = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)


def swap_operands(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for n in _exprs(fn):
        if isinstance(n, ast.BinOp) and isinstance(n.op, _NONCOMM):
            left, right = n.left, n.right
        elif isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(
                n.ops[0], (ast.Lt, ast.Gt, ast.LtE, ast.GtE)):
            left, right = n.left, n.comparators[0]
        else:
            continue
        a, b = src.off(left.lineno, left.col_offset), src.off(right.end_lineno or 0,
                                                              right.end_col_offset or 0)
        _ga, _gb, gap = _gap(src, left, right)
        if b"\n" in gap:
            continue
        ls, rs = src.seg(left), src.seg(right)
        if ls == rs:
            continue
        out.append((Edit(src.path, a, b, rs + gap + ls),))
    return out


def change_constant(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for n in _exprs(fn):
        if isinstance(n, ast.Constant) and type(n.value) is int and n.end_lineno == n.lineno:
            seg = src.seg(n)
            if not re.fullmatch(rb"\d+", seg):
                continue
            new = n.value + 1 if n.value in (0, 1) or n.lineno % 2 else n.value - 1
            a, b = src.span(n)
            out.append((Edit(src.path, a, b, str(new).encode()),))
    return out


def break_chain(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for n in _exprs(fn):
        if isinstance(n, ast.BinOp) and isinstance(n.left, ast.BinOp):
            inner = n.left
            _a, _b, gap = _gap(src, inner, n.right)
            if b"\n" in gap or b"(" in gap or b")" in gap:
                continue
            a, b = src.span(n)
            out.append((Edit(src.path, a, b, src.seg(inner.left) + gap + src.seg(n.right)),))
        elif isinstance(n, ast.BoolOp) and len(n.values) >= 3:
            a, b = src.span(n)
            keep = [src.seg(v) for i, v in enumerate(n.values) if i != 1]
            op = b" and " if isinstance(n.op, ast.And) else b" or "
            out.append((Edit(src.path, a, b, op.join(keep)),))
    return out


def swap_bool_op(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for n in _exprs(fn):
        if isinstance(n, ast.BoolOp) and len(n.values) == 2:
            a, _b, gap = _gap(src, n.values[0], n.values[1])
            old, new = (rb"\band\b", b"or") if isinstance(n.op, ast.And) else (rb"\bor\b", b"and")
            e = _replace_token(src, a, gap, old, new)
            if e:
                out.append((e,))
    return out


def invert_if_else(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for n in _exprs(fn):
        if not (isinstance(n, ast.If) and n.orelse) or complexity(fn) < 5:
            continue
        if n.body[0].lineno == n.lineno or n.orelse[0].lineno == n.body[-1].end_lineno:
            continue
        else_line = src.lines[n.orelse[0].lineno - 1].lstrip()
        if else_line.startswith(b"elif") or isinstance(n.orelse[0], ast.If) and \
                src.lines[n.orelse[0].lineno - 1].lstrip().startswith(b"elif"):
            continue
        if not all(_own_lines(src, s) for s in (*n.body, *n.orelse)):
            continue
        b0, b1 = _first_line(n.body[0]), n.body[-1].end_lineno or 0
        e0, e1 = _first_line(n.orelse[0]), n.orelse[-1].end_lineno or 0
        body = b"".join(src.lines[b0 - 1:b1])
        middle = b"".join(src.lines[b1:e0 - 1])
        other = b"".join(src.lines[e0 - 1:e1])
        if body == other or b"else" not in middle:
            continue
        a, b = src.line_range(b0, e1)
        out.append((Edit(src.path, a, b, other + middle + body),))
    return out


def _stmt_removals(src: Source, fn: ast.AST, pred: Callable[[ast.stmt], bool]) -> Sites:
    out: Sites = []
    for block in _blocks(fn):
        for st in block:
            if pred(st):
                e = _remove_stmt(src, block, st)
                if e:
                    out.append((e,))
    return out


def remove_conditional(src: Source, fn: ast.AST) -> Sites:
    return _stmt_removals(src, fn, lambda s: isinstance(s, ast.If) and not s.orelse)


def remove_assign(src: Source, fn: ast.AST) -> Sites:
    return _stmt_removals(src, fn, lambda s: isinstance(s, (ast.Assign, ast.AugAssign)) or (
        isinstance(s, ast.AnnAssign) and s.value is not None))


def remove_loop(src: Source, fn: ast.AST) -> Sites:
    return _stmt_removals(src, fn, lambda s: isinstance(s, (ast.For, ast.While, ast.AsyncFor)))


def remove_raise(src: Source, fn: ast.AST) -> Sites:
    return _stmt_removals(src, fn, lambda s: isinstance(s, ast.Raise))


def remove_wrapper(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for block in _blocks(fn):
        for st in block:
            if not isinstance(st, (ast.With, ast.AsyncWith, ast.Try)) or not _own_lines(src, st):
                continue
            body = st.body
            if not body or body[0].lineno == st.lineno:
                continue
            b0, b1 = _first_line(body[0]), body[-1].end_lineno or 0
            outer, inner = src.indent(st.lineno), src.indent(body[0].lineno)
            if not inner.startswith(outer) or inner == outer:
                continue
            cut = len(inner) - len(outer)
            lines = [ln[cut:] if ln[:cut].strip() == b"" else ln.lstrip()
                     for ln in src.lines[b0 - 1:b1]]
            a, b = src.line_range(_first_line(st), st.end_lineno or st.lineno)
            out.append((Edit(src.path, a, b, b"".join(lines)),))
    return out


def shuffle_lines(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for block in _blocks(fn):
        for s1, s2 in itertools.pairwise(block):
            if _is_docstring(block, s1) or not (_own_lines(src, s1) and _own_lines(src, s2)):
                continue
            if isinstance(s1, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) or \
                    isinstance(s2, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                continue
            f1, l1 = _first_line(s1), s1.end_lineno or 0
            f2, l2 = _first_line(s2), s2.end_lineno or 0
            t1, mid, t2 = (b"".join(src.lines[f1 - 1:l1]), b"".join(src.lines[l1:f2 - 1]),
                           b"".join(src.lines[f2 - 1:l2]))
            if t1 == t2:
                continue
            a, b = src.line_range(f1, l2)
            out.append((Edit(src.path, a, b, t2 + mid + t1),))
    return out


def _shift(seg: bytes, delta: int) -> bytes:
    simple = re.fullmatch(rb"[\w.]+", seg) is not None
    core = seg if simple else b"(" + seg + b")"
    return core + (b" + 1" if delta > 0 else b" - 1")


def off_by_one(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for n in _exprs(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "range" \
                and 1 <= len(n.args) <= 3 and not n.keywords:
            stop = n.args[0] if len(n.args) == 1 else n.args[1]
            if stop.end_lineno != stop.lineno:
                continue
            a, b = src.span(stop)
            out.append((Edit(src.path, a, b, _shift(src.seg(stop), -1)),))
        elif isinstance(n, ast.Slice) and n.step is None:
            bound = n.upper or n.lower
            if bound is None or bound.end_lineno != bound.lineno:
                continue
            a, b = src.span(bound)
            out.append((Edit(src.path, a, b, _shift(src.seg(bound), +1 if n.upper else -1)),))
    return out


def wrong_return(src: Source, fn: ast.AST) -> Sites:
    out: Sites = []
    for n in _exprs(fn):
        if isinstance(n, ast.Return) and n.value is not None and not (
                isinstance(n.value, ast.Constant) and n.value.value is None):
            a, b = src.span(n.value)
            out.append((Edit(src.path, a, b, b"None"),))
    return out


def remove_method(src: Source, cls: ast.AST) -> Sites:
    if not isinstance(cls, ast.ClassDef):
        return []
    methods = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
               and not (s.name.startswith("__") and s.name.endswith("__")
                        and s.name not in ("__eq__", "__len__", "__iter__", "__contains__",
                                           "__getitem__", "__hash__", "__repr__", "__call__"))]
    out: Sites = []
    for m in methods:
        e = _remove_stmt(src, cls.body, m)
        if e:
            out.append((e,))
    return out


def remove_base(src: Source, cls: ast.AST) -> Sites:
    if not isinstance(cls, ast.ClassDef) or not cls.bases:
        return []
    out: Sites = []
    names = [src.seg(b) for b in cls.bases] + [src.seg(k) for k in cls.keywords]
    first = cls.bases[0]
    last = (cls.keywords or cls.bases)[-1]
    a = src.off(first.lineno, first.col_offset)
    b = src.off(last.end_lineno or 0, last.end_col_offset or 0)
    for i, base in enumerate(cls.bases):
        if src.seg(base) in (b"object",):
            continue
        rest = [x for j, x in enumerate(names) if j != i]
        if not rest:  # class A(B): -> class A(object): keeps the parentheses valid
            rest = [b"object"]
        out.append((Edit(src.path, a, b, b", ".join(rest)),))
    return out


FunctionModifier = Callable[[Source, ast.AST], Sites]

MODIFIERS: dict[str, FunctionModifier] = {
    "change_operator": change_operator, "flip_comparison": flip_comparison,
    "swap_operands": swap_operands, "change_constant": change_constant,
    "break_chain": break_chain, "swap_bool_op": swap_bool_op,
    "invert_if_else": invert_if_else, "remove_conditional": remove_conditional,
    "remove_assign": remove_assign, "remove_loop": remove_loop,
    "remove_wrapper": remove_wrapper, "shuffle_lines": shuffle_lines,
    "off_by_one": off_by_one, "remove_raise": remove_raise, "wrong_return": wrong_return,
}
CLASS_MODIFIERS: dict[str, FunctionModifier] = {
    "remove_method": remove_method, "remove_base": remove_base,
}
ALL_MODIFIERS: tuple[str, ...] = (*MODIFIERS, *CLASS_MODIFIERS)


def apply_edits(data: bytes, edits: Sequence[Edit]) -> bytes:
    """``data`` with ``edits`` applied (they must not overlap)."""
    out = data
    last = None
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        if last is not None and e.end > last:
            raise ValueError("overlapping edits")
        out = out[:e.start] + e.text + out[e.end:]
        last = e.start
    return out


def _valid_change(old: bytes, new: bytes) -> bool:
    try:
        a, b = ast.parse(old), ast.parse(new)
    except (SyntaxError, ValueError):
        return False
    return ast.dump(a) != ast.dump(b)


def _units(tree: ast.Module) -> Iterator[tuple[str, ast.AST, bool]]:
    """(qualified name, node, is_class) for every function and class in a module."""
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + ch.name, ch, False
                stack.append((prefix + ch.name + ".", ch))
            elif isinstance(ch, ast.ClassDef):
                yield prefix + ch.name, ch, True
                stack.append((prefix + ch.name + ".", ch))
            elif isinstance(ch, (ast.If, ast.Try, ast.With)):
                stack.append((prefix, ch))


def find_bugs(path: str, data: bytes, covered: set[str], rng: random.Random, *,
              per_site_kind: int = 2, min_complexity: int = MIN_COMPLEXITY) -> list[Bug]:
    """Candidate single bugs in one module: for each covered function (its
    ``path:first line`` in ``covered``) above the complexity threshold, up to
    ``per_site_kind`` random sites of each modifier; for each class with a covered method,
    the class modifiers. Each bug's result parses and differs from the original."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return []
    src = Source(path, data)
    out: list[Bug] = []
    for qual, node, is_class in _units(tree):
        first = _first_line(node)  # type: ignore[arg-type]
        key = f"{path}:{first}"
        if is_class:
            methods = [m for m in node.body  # type: ignore[attr-defined]
                       if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            keys = [f"{path}:{_first_line(m)}" for m in methods]
            hit = [k for k in keys if k in covered]
            if not hit:
                continue
            key = hit[0]  # the class's bugs are caught by the tests of a covered method
            mods = CLASS_MODIFIERS
        else:
            if key not in covered or complexity(node) < min_complexity:
                continue
            mods = MODIFIERS
        for name, mod in mods.items():
            sites = mod(src, node)
            rng.shuffle(sites)
            kept = 0
            for edits in sites:
                if kept >= per_site_kind:
                    break
                try:
                    new = apply_edits(data, edits)
                except ValueError:
                    continue
                if not _valid_change(data, new):
                    continue
                out.append(Bug(name, path, qual, key, tuple(edits)))
                kept += 1
    return out
