"""Hidden-test preparation, issue text and the report: pure functions."""

from __future__ import annotations

from pathlib import Path

from ceiling.synth._hidden import (
    flat_names,
    helper_files,
    hidden_tests,
    rewrite_helper_imports,
    strip_tests,
    with_header,
)
from ceiling.synth._issue_text import leaks, scrub, template_issue
from ceiling.synth._manifest import Log, report
from ceiling.synth._source import load_source

FIXTURE = Path(__file__).parent / "fixtures" / "minicalc"


def test_flat_names_are_unique_test_files() -> None:
    names = flat_names(["a/tests/test_x.py", "b/tests/test_x.py", "tests/test_y.py"])
    assert len(set(names.values())) == 3
    assert all(n.startswith("test_") and n.endswith(".py") for n in names.values())
    assert names["tests/test_y.py"] == "test_y.py"


def test_header_goes_after_docstring_and_future_imports() -> None:
    src = '"""doc"""\nfrom __future__ import annotations\nimport os\n'
    out = with_header(src, "src")
    lines = out.splitlines()
    assert lines[0] == '"""doc"""' and lines[1].startswith("from __future__")
    assert "sys.path.insert(0" in lines[2] and '"src"' in lines[2]
    compile(out, "t.py", "exec")


def test_strip_tests_removes_only_named_tests() -> None:
    src = ("def test_a():\n    pass\n\n\n@mark\ndef test_b():\n    assert 1\n\n\n"
           "class TestC:\n    def test_m(self):\n        pass\n")
    out = strip_tests(src, {"test_b", "TestC::test_m"})
    assert out is not None and "test_b" not in out and "test_m" not in out
    assert "def test_a" in out
    compile(out, "t.py", "exec")
    assert strip_tests(src, {"test_missing"}) is None


def test_issue_text_names_no_library_file() -> None:
    msg = ("def test_x():\n>       assert f(1) == 2\nminicalc/core.py:12: in f\n"
           "E       assert 3 == 2\nE        +  where 3 = <function f at 0x7f00>(1)\n")
    lines = scrub(msg, ["minicalc/core.py"])
    assert lines == ["E       assert 3 == 2", "E        +  where 3 = <function f>(1)"]
    text = template_issue("minicalc", ["test_core.py::test_x"], {"test_core.py::test_x": msg},
                          ["minicalc/core.py"], seed=1)
    assert leaks(text, ["minicalc/core.py"]) is None
    assert "test_x" in text and "assert 3 == 2" in text


def test_report_counts_yield_and_refusals(tmp_path: Path) -> None:
    log = Log(tmp_path / "log.jsonl")
    log.append({"key": "a", "result": "card", "project": "p", "modifiers": ["m1"]})
    log.append({"key": "b", "result": "refused", "reason": "no_fail_to_pass",
                "project": "p", "modifiers": ["m1", "m2"]})
    with (tmp_path / "log.jsonl").open("ab") as f:
        f.write(b'{"key": "c", "res')  # a killed writer's partial line is ignored
    log.append({"key": "d", "result": "card", "project": "q", "modifiers": ["m2"]})
    recs = log.read()
    assert [r["key"] for r in recs] == ["a", "b", "d"]
    rep = report(recs, seconds=120)
    assert (rep["cards"], rep["candidates"], rep["yield"]) == (2, 3, 0.6667)
    assert rep["refusals"] == {"no_fail_to_pass": 1}
    assert rep["cards_per_min"] == 1.0
    assert rep["per_modifier"]["m2"]["candidates"] == 2
    assert rep["per_project"]["q"]["cards"] == 1


def test_fixture_source_is_read() -> None:
    p = load_source(str(FIXTURE), cache=Path("/nonexistent"))
    assert p.name == "minicalc" and p.import_root == ""
    assert p.test_files == ["tests/test_core.py", "tests/test_text.py"]
    assert p.module_files() == ["minicalc/__init__.py", "minicalc/core.py", "minicalc/text.py"]


def test_combinations_never_hold_overlapping_edits() -> None:
    """A class-level bug spans its methods' bytes: combined with a method's bug, applying
    both raised "overlapping edits" and ended the project's synthesis (parse==1.20.1)."""
    import random

    from ceiling.synth._modifiers import Bug, Edit
    from ceiling.synth._repo import RepoSynth, _overlap

    cls = Bug("remove_base", "m.py", "Foo", "m.py:1", (Edit("m.py", 0, 100, b"class Foo:"),))
    meth = Bug("invert_if", "m.py", "Foo.bar", "m.py:5", (Edit("m.py", 40, 60, b"x"),))
    other = Bug("off_by_one", "m.py", "baz", "m.py:20", (Edit("m.py", 200, 210, b"y"),))
    assert _overlap(cls, meth) and not _overlap(cls, other) and not _overlap(meth, other)
    pool = [cls, meth, other]
    for seed in range(30):
        for combo in RepoSynth.combos(None, pool, 4, random.Random(seed)):  # type: ignore[arg-type]
            assert not (cls in combo and meth in combo), combo


def _tree(files: dict[str, str]) -> dict[str, object]:
    from ceiling.cards import FileEntry

    return {p: FileEntry(t.encode()) for p, t in files.items()}


HELPED = {
    "tests/__init__.py": "class Mixin:\n    N = 3\n",
    "tests/helpers.py": "from . import Mixin\n\ndef triple(x):\n    return x * Mixin.N\n",
    "tests/sub/__init__.py": "",
    "tests/sub/test_deep.py": "from ..helpers import triple\n\ndef test_deep():\n"
                              "    assert triple(1) == 3\n",
    "tests/test_a.py": "import os\nfrom . import Mixin\nfrom .helpers import triple as t3\n"
                       "from tests.helpers import (\n    triple,\n)\nfrom . import helpers\n"
                       "import tests.helpers as th\nimport tests.helpers\n"
                       "import os; from . import Mixin as M2\n"
                       "try:\n    from .helpers import triple as t4\nexcept ImportError:\n"
                       "    pass\n",
    "tests/conftest.py": "X = 1\n",
    "pkg/__init__.py": "",
}


def test_helper_modules_travel_and_their_imports_are_rewritten() -> None:
    tree = _tree(HELPED)
    helpers = helper_files(tree, ["tests/test_a.py", "tests/sub/test_deep.py"])
    assert helpers == {"tests": "tests/__init__.py", "tests.helpers": "tests/helpers.py",
                       "tests.sub": "tests/sub/__init__.py"}  # conftest and pkg are not
    out = rewrite_helper_imports(HELPED["tests/test_a.py"], "tests/test_a.py", helpers)
    lines = out.splitlines()
    assert "from _csynth_tests import Mixin" in lines
    assert "from _csynth_tests__helpers import triple as t3" in lines
    assert "from _csynth_tests__helpers import triple" in lines  # the parenthesised one
    assert "import _csynth_tests__helpers as helpers" in lines
    assert "import _csynth_tests__helpers as th" in lines
    assert "import tests.helpers" in lines  # binds `tests`: left as it was
    assert "import os; from . import Mixin as M2" in lines  # shares its line: left
    assert "    from _csynth_tests__helpers import triple as t4" in lines  # indentation kept
    deep = rewrite_helper_imports(HELPED["tests/sub/test_deep.py"], "tests/sub/test_deep.py",
                                  helpers)
    assert deep.startswith("from _csynth_tests__helpers import triple\n")
    # beyond the top package: unchanged
    assert rewrite_helper_imports("from ... import x\n", "tests/test_a.py", helpers) == \
        "from ... import x\n"
    hidden = hidden_tests(tree, ["tests/sub/test_deep.py"], "")
    assert set(hidden) == {"test_deep.py", "_csynth_tests.py", "_csynth_tests__helpers.py",
                           "_csynth_tests__sub.py"}
    assert b"from _csynth_tests import Mixin" in hidden["_csynth_tests__helpers.py"].data
    # tests that import no helper carry none
    plain = _tree({"tests/__init__.py": "", "tests/test_p.py": "def test_p():\n    pass\n"})
    assert set(hidden_tests(plain, ["tests/test_p.py"], "")) == {"test_p.py"}
