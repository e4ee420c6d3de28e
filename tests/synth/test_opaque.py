"""Commands the replay does not invert: what they touch, the fills that make them act, and
cards tested against the verifier's reference run (``acceptance.reference``)."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest

from ceiling.cards import Acceptance, FileEntry, TaskCard
from ceiling.synth._opaque import analyze, regex_example, sed_examples, split_unquoted
from ceiling.synth._replay import Unrecoverable, recover
from ceiling.synth._traj_read import Step, Traj
from ceiling.synth._trajectories import build_card, piece
from ceiling.tools import Action


def T(*cmds: str) -> Traj:
    return Traj("t", "do it", [Step("run", {"cmd": c}, "[ok]") for c in cmds], outcome="solved")


def test_what_an_opaque_line_touches() -> None:
    t = analyze("awk '{print $9}' logs/a.log | sort | uniq -c | awk '{print $2, $1}' "
                "> report/a.txt")
    assert t.inputs == ["logs/a.log"] and t.outputs == ["report/a.txt"]
    t = analyze("tar czf backups/egg.tar.gz $(find data/egg -name '*.csv' | sort)")
    assert t.outputs == ["backups/egg.tar.gz"] and t.finds == {"data/egg": "part-1.csv"}
    t = analyze("mkdir -p restore/koi && tar xzf incoming/koi.tar.gz -C restore/koi")
    assert t.inputs == ["incoming/koi.tar.gz"] and t.dirs == ["restore/koi"]
    t = analyze("sed -i '/^\\[client\\]/,/^\\[/ s/^retries = .*/retries = 3/' etc/a.conf")
    assert t.inplace == ["etc/a.conf"]
    assert t.examples["etc/a.conf"] == [b"[client]", b"retries = ", b"["]
    t = analyze("python3 -m tarfile -e incoming/m.tar.gz restore/m")
    assert t.inputs == ["incoming/m.tar.gz"]
    assert analyze("sh bin/run.sh --fast").scripts == ["bin/run.sh"]
    t = analyze("tar czf - data > x.tgz")
    assert t.outputs == ["x.tgz"] and t.inputs == ["data"]


@pytest.mark.parametrize("line", ["git revert HEAD", "cat *.log > x", "wget http://x",
                                  "awk 1 /etc/passwd > x", "find . -delete",
                                  "python3 -c 'print(1)' > x", "tar czf x.tgz ../etc"])
def test_what_stays_refused(line: str) -> None:
    with pytest.raises(Unrecoverable) as e:
        analyze(line)
    assert e.value.reason in ("unsupported_command", "path_outside_workspace")


def test_quotes_hide_operators_and_globs() -> None:
    assert split_unquoted("sed -i 's|^IN=.*|IN=x|' a.sh && sh a.sh; echo '*'") == [
        "sed -i 's|^IN=.*|IN=x|' a.sh", "sh a.sh", "echo '*'"]
    assert regex_example(r"^\[client\]") == "[client]"
    assert regex_example(r"^retries = .*") == "retries = "
    assert regex_example(r"a\(b\)") is None
    assert sed_examples(r"s/^ *\([0-9]*\) \(.*\)/\2 \1/") == []  # groups: not generated


def test_fills_make_the_commands_act() -> None:
    r = recover(T("sed -i 's|^IN=.*|IN=data/x.csv|' bin/x.sh", "sh bin/x.sh",
                  "mkdir -p out && tar xzf in/a.tar.gz -C out",
                  "tar czf b.tar.gz $(find data/d -name '*.csv' | sort)"))
    files = r.initial_files()
    assert files["bin/x.sh"][0] == b"IN=\ntrue\n"  # a script that runs
    with tarfile.open(fileobj=io.BytesIO(files["in/a.tar.gz"][0])) as tf:
        assert tf.getnames() == ["part-1.txt"]
    assert "data/d/part-1.csv" in files and r.opaque
    assert r.final["b.tar.gz"] is not None and r.final["b.tar.gz"].opaque


needs_ns = pytest.mark.skipif("__import__('ceiling.sandbox').sandbox.namespaces_available()"
                              " is not None", reason="needs the namespace sandbox")


@needs_ns
def test_a_reference_card_passes_its_oracle_and_fails_the_rest() -> None:
    """An awk report and a sed address edit: the oracle passes, the untouched workspace
    and a wrong report fail, and another start (other file contents) still passes its
    own oracle: the reference is run from the card's start at grading time."""
    from ceiling.check import run_plan
    from ceiling.verify import oracle_plan

    pc = piece(T("mkdir -p report",
                 "awk '{print $2}' logs/a.log | sort | uniq -c > report/a.txt",
                 "sed -i '/^\\[client\\]/a workers = 8' etc/s.conf"))
    card = build_card([pc], "single")
    assert card.acceptance.reference and card.acceptance.initial_state
    assert [t.split("::")[1] for t in card.acceptance.tests] == ["test_matches_reference"]
    v, _ = run_plan(card, oracle_plan())
    assert v.outcome.passed, v
    null = card.model_copy(update={"solution": "true\n"})
    v, _ = run_plan(null, oracle_plan())
    assert not v.outcome.passed
    # the wrong field: graded against the reference run of the card's own solution
    wrong = card.model_copy(update={"solution": card.solution + "echo extra >> report/a.txt\n"})
    v, _ = run_plan(wrong.model_copy(update={"solution": card.solution}), _plan(
        wrong.solution))
    assert not v.outcome.passed
    other = {"logs/a.log": FileEntry(b"x b\ny c\nz b\n"),
             "etc/s.conf": FileEntry(b"[server]\n[client]\nport = 1\n")}
    v, _ = run_plan(card.model_copy(update={"workspace": other}), oracle_plan())
    assert v.outcome.passed, v


class _plan:
    name = "one-script"

    def __init__(self, script: str) -> None:
        self.script = script

    def next_action(self, card: TaskCard, history: list) -> Action:  # type: ignore[type-arg]
        return Action("run", {"cmd": self.script}) if not history else Action("submit")


def _ref_card(solution: str, **files: bytes) -> TaskCard:
    from ceiling.synth._trajectories import REFERENCE_HELPERS, REFERENCE_TEST, TEST_HEAD

    card = TaskCard(id="synth_traj/ref-v1", type="terminal_ops", horizon="short",
                    instruction="Make out.txt.",
                    acceptance=Acceptance(tests=["test_end_state.py::test_matches_reference"],
                                          runner="files", initial_state=True, reference=True))
    card.workspace = {k.replace("__", "/").replace("_", "."): FileEntry(v)
                      for k, v in files.items()}
    card.tests = {"test_end_state.py": FileEntry(
        (TEST_HEAD + REFERENCE_HELPERS + "\n\n" + REFERENCE_TEST).encode())}
    card.solution = solution
    return card


@needs_ns
def test_the_agent_cannot_shape_the_reference() -> None:
    """The reference run starts from the card's layers, never from the episode's state:
    changing the input and writing the matching output does not pass, and a gzip bomb
    named like the expected archive fails the test (it does not hang or crash grading)."""
    from ceiling.check import run_plan

    card = _ref_card("set -e\ncat in_txt > out.txt\n".replace("in_txt", "in.txt"),
                     in_txt=b"real\n")
    v, _ = run_plan(card, _plan("echo forged > in.txt && cat in.txt > out.txt"))
    assert not v.outcome.passed and v.reward <= 0, v
    v, _ = run_plan(card, _plan("cat in.txt > out.txt"))
    assert v.outcome.passed, v

    arch = _ref_card("set -e\ntar czf b.tar.gz in.txt\n", in_txt=b"real\n")
    v, _ = run_plan(arch, _plan("tar czf b.tar.gz in.txt"))  # other mtimes, same members
    assert v.outcome.passed, v
    bomb = gzip.compress(b"\0" * (40 << 20))
    script = ("python3 -c \"import gzip,sys; open('b.tar.gz','wb').write(gzip.compress("
              "b'\\\\0' * (40 << 20)))\"")
    assert len(bomb) < 100_000
    v, _ = run_plan(arch, _plan(script))
    assert not v.outcome.passed and v.outcome.value != "infra_error", v


def test_reference_needs_a_host_runner() -> None:
    with pytest.raises(ValueError, match="reference"):
        TaskCard(id="x/y-v1", type="terminal_ops", horizon="short", instruction="i",
                 acceptance=Acceptance(runner="inprocess", reference=True))


@needs_ns
def test_a_folder_link_to_the_reference_does_not_pass() -> None:
    """The grader's host copies sit side by side (workspace/, reference/): a folder
    replaced by a link into the reference copy is an escaping link (-1), and the test
    itself refuses a link on the way to a compared path."""
    from ceiling.check import run_plan

    card = _ref_card("set -e\ncp in.txt out/r.txt\n", in_txt=b"real\n", out__keep=b"")
    hack = "rm -rf out && ln -s ../reference/out out"
    v, _ = run_plan(card, _plan(hack))
    assert not v.outcome.passed and v.reward < 0, v
    v, _ = run_plan(card, _plan("cp in.txt out/r.txt"))
    assert v.outcome.passed, v
