"""Trajectory reconstruction: file operations replayed backwards, refusals with reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ceiling._errors import ConfigError
from ceiling.synth._replay import Unrecoverable, recover
from ceiling.synth._traj_read import Step, Traj, read_trajs
from ceiling.synth._trajectories import breadth_pairs, chains, piece


def T(*steps: tuple[str, dict[str, str], str], outcome: str | None = None) -> Traj:
    return Traj("t", "do it", [Step(t, a, o) for t, a, o in steps], outcome=outcome)


def test_read_then_moves_recover_exact_content() -> None:
    r = recover(T(("read", {"path": "logs/a.log"}, "one\ntwo"),
                  ("run", {"cmd": "mv logs/a.log logs/a.log.1"}, "[ok]"),
                  ("run", {"cmd": ": > logs/a.log"}, "[ok]")))
    files = r.initial_files()
    assert files == {"logs/a.log": (b"one\ntwo\n", 0o644, True)}
    assert r.final_value("logs/a.log.1") == b"one\ntwo\n"
    assert r.final_value("logs/a.log") == b""


def test_edit_is_undone_on_a_later_read() -> None:
    r = recover(T(("edit", {"path": "app.py", "old": "helo", "new": "hello"}, "wrote"),
                  ("read", {"path": "app.py"}, "print('hello')")))
    assert r.init_content["app.py"] == b"print('helo')\n"


def test_created_file_did_not_exist_and_append_is_cut_off() -> None:
    r = recover(T(("write", {"path": "out/r.txt", "content": "x\n"}, "wrote"),
                  ("run", {"cmd": "echo more >> notes.txt"}, ""),
                  ("run", {"cmd": "cat notes.txt"}, "old\nmore")))
    assert r.init_exists["out/r.txt"] is False
    assert r.init_content["notes.txt"] == b"old\n"
    assert "out/r.txt" not in r.initial_files()


def test_fill_holds_the_literal_a_substitution_needs() -> None:
    r = recover(T(("run", {"cmd": "sed -i 's/debug = true/debug = false/g' app.conf"}, ""),
                  ("run", {"cmd": "chmod 755 run.sh"}, "")))
    files = r.initial_files()
    assert b"debug = true" in files["app.conf"][0] and files["app.conf"][2] is False
    assert files["run.sh"][1] != 0o755


@pytest.mark.parametrize(("cmd", "reason"), [
    ("git revert HEAD", "unsupported_command"),
    ("curl -o x.json http://example.org", "unsupported_command"),
    ("cat logs/*.log > all.log", "unsupported_command"),  # an unquoted glob
    ("sort a.txt | python3 -c 'import sys' > b", "unsupported_command"),
    ("rm -rf build", "unsupported_command"),
    ("mv ../etc/passwd x", "path_outside_workspace"),
    ("ls -la", "no_effect"),
])
def test_refusals_have_reasons(cmd: str, reason: str) -> None:
    with pytest.raises(Unrecoverable) as e:
        recover(T(("run", {"cmd": cmd}, "")))
    assert e.value.reason == reason


def test_gave_up_and_unsolved_are_refused() -> None:
    with pytest.raises(Unrecoverable) as e:
        piece(T(("give_up", {"reason": "x"}, "")))
    assert e.value.reason == "gave_up"
    with pytest.raises(Unrecoverable) as e:
        piece(T(("run", {"cmd": "rm a"}, ""), outcome="failed"))
    assert e.value.reason == "not_solved"


def test_tests_from_the_end_state() -> None:
    pc = piece(T(("run", {"cmd": "mv a.txt b.txt"}, ""), ("run", {"cmd": "rm c.txt"}, "")))
    bodies = "\n".join(b for _n, b in pc.tests)
    assert "not os.path.lexists(WS / 'a.txt')" in bodies
    assert "not os.path.lexists(WS / 'c.txt')" in bodies
    assert "data('b.txt')" in bodies
    assert pc.oracle == ["mv a.txt b.txt", "rm c.txt"]


def test_depth_and_breadth_pairing() -> None:
    a = piece(Traj("a", "", [Step("write", {"path": "out.txt", "content": "r\n"}, "")]))
    b = piece(Traj("b", "", [Step("run", {"cmd": "mv in.txt done.txt"}, "")]))
    c = piece(Traj("c", "", [Step("run", {"cmd": "rm out.txt"}, "")]))
    assert [tuple(p.traj.id for p in g) for g in chains([a, b, c], 2)] == [("a", "b")]
    pairs = breadth_pairs([a, b], 1)
    assert [(x.traj.id, y.traj.id, i, o) for x, y, i, o in pairs] == [
        ("a", "b", "out.txt", "in.txt")]


def test_generic_jsonl_and_errors(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps({"id": "x", "steps": [{"tool": "run", "args": {"cmd": "rm a"}}]})
                 + "\n")
    [t] = read_trajs(f)
    assert t.id == "x" and t.steps[0].args == {"cmd": "rm a"}
    f.write_text('{"nope": 1}\n')
    with pytest.raises(ConfigError, match=r"t.jsonl:1"):
        read_trajs(f)


def test_unseen_contents_are_checked_against_the_initial_state() -> None:
    """Content the trajectory never saw is tested relationally: the recorded operations
    replayed on the card's initial content ($INITIAL), so the tests hold for whatever the
    start held. Played on another start (as the fidelity check does with the original
    card's files), the right end state passes and a wrong one fails."""
    from ceiling.cards import FileEntry
    from ceiling.check import run_plan
    from ceiling.sandbox import namespaces_available
    from ceiling.synth._trajectories import build_card
    from ceiling.verify import oracle_plan

    pc = piece(T(("run", {"cmd": "cp ring.md soup.log"}, ""),
                 ("run", {"cmd": "mv owl.txt sand.cfg"}, ""),
                 ("run", {"cmd": "sed -i 's/a.b/X/' notes.txt"}, ""),
                 ("run", {"cmd": "echo tail >> notes.txt"}, ""),
                 ("run", {"cmd": "wc -l < notes.txt > n.txt"}, "")))
    bodies = "\n".join(b for _n, b in pc.tests)
    assert "data('soup.log') == replay('ring.md', [])" in bodies
    assert "data('sand.cfg') == replay('owl.txt', [])" in bodies
    assert "data('notes.txt') == replay('notes.txt', [('sub', b'a.b', b'X', False), " \
           "('append', b'tail\\n')])" in bodies
    card = build_card([pc], "single")
    assert card.acceptance.protected == ["ring.md"] and card.acceptance.initial_state
    if namespaces_available() is not None:
        pytest.skip("needs the namespace sandbox")
    other = {"ring.md": FileEntry(b"ring\n"), "owl.txt": FileEntry(b"owl 1\nowl 2\n"),
             "notes.txt": FileEntry(b"a-b a.b\nzz\naxb\n")}
    v, _ = run_plan(card.model_copy(update={"workspace": other}), oracle_plan())
    assert v.outcome.passed, v
    wrong = card.model_copy(update={"workspace": other, "solution": card.solution.replace(
        "'s/a.b/X/'", "'s/a.b/X/g'")})
    v, _ = run_plan(wrong, oracle_plan())
    assert not v.outcome.passed  # sed without g changes the first match of each line only

def test_a_deletion_only_card_does_not_pay_deleting_everything() -> None:
    """ceiling redteam found 'delete everything' earning 1.0 on cards recovered from
    trajectories that only delete (the workspace held nothing else). A bystander file the
    task never names joins the workspace, protected and checked against $INITIAL."""
    from ceiling.cards import FileEntry
    from ceiling.check import run_plan
    from ceiling.sandbox import namespaces_available
    from ceiling.synth._trajectories import build_card
    from ceiling.verify import oracle_plan
    from ceiling.verify.exploits import EXPLOITS

    pc = piece(T(("run", {"cmd": "rm cache/a.tmp"}, ""), ("run", {"cmd": "rm cache/b.bak"}, "")))
    card = build_card([pc], "single")
    assert "cache/notes.txt" in card.workspace and card.acceptance.protected == ["cache/notes.txt"]
    if namespaces_available() is not None:
        pytest.skip("needs the namespace sandbox")
    v, _ = run_plan(card, oracle_plan())
    assert v.outcome.passed, v
    nuke = EXPLOITS["delete_everything"]
    v, _ = run_plan(card, nuke)
    assert v.reward <= 0, v
    # a start without the bystander (the original card's, in the fidelity check) passes
    other = {"cache/a.tmp": FileEntry(b"a\n"), "cache/b.bak": FileEntry(b"b\n"),
             "hello.md": FileEntry(b"keep me\n")}
    v, _ = run_plan(card.model_copy(update={"workspace": other}), oracle_plan())
    assert v.outcome.passed, v
