"""The template registry, ``make`` and the ``ceiling envs list|show`` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ceiling import ConfigError
from ceiling.cards import load_card
from ceiling.cards._schema import ID_RE
from ceiling.cli import main
from ceiling.envs import MAX_SEED, VARIANTS, get_template, make, templates


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


def test_registry_ids_are_versioned_unique_and_sorted() -> None:
    ids = [t.template_id() for t in templates()]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    assert all(ID_RE.match(i) and i.split("/")[0] == t.family
               for i, t in zip(ids, templates(), strict=True))
    assert "terminal_ops/log-rotate-v1" in ids
    fam = templates("terminal_ops")
    assert fam and all(t.family == "terminal_ops" for t in fam)


def test_every_registered_template_makes_its_family_type() -> None:
    for t in templates():
        card = make(t.template_id(), seed=1)
        assert card.type == t.family and card.template == t.template_id()
        assert card.horizon == t.horizons[t.difficulties[0]]


def test_make_sets_id_seed_split_and_feasible() -> None:
    card = make("terminal_ops/demo-copy-v1", seed=42, variant="heldout")
    assert card.id == "terminal_ops/demo-copy-v1@s42-d1-heldout"
    assert (card.seed, card.difficulty, card.split, card.feasible) == (42, 1, "heldout", True)
    inf = make("terminal_ops/demo-copy-v1", seed=42, variant="infeasible")
    assert inf.split == "train" and not inf.feasible and inf.infeasible_reason
    # the id with its @suffix is accepted too
    assert get_template(card.id).template_id() == "terminal_ops/demo-copy-v1"


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"template_id": "terminal_ops/log-rotat-v1"}, "did you mean 'terminal_ops/log-rotate-v1'"),
    ({"template_id": "terminal_ops/log-rotate-v1", "seed": -1}, "out of range"),
    ({"template_id": "terminal_ops/log-rotate-v1", "seed": MAX_SEED + 1}, "out of range"),
    ({"template_id": "terminal_ops/log-rotate-v1", "difficulty": 9}, "use one of [1, 2, 3]"),
    ({"template_id": "terminal_ops/log-rotate-v1", "variant": "test"}, "unknown variant"),
])
def test_make_bad_input_is_a_clear_error(kwargs: dict, needle: str) -> None:
    tid = kwargs.pop("template_id")
    with pytest.raises(ConfigError) as e:
        make(tid, **kwargs)
    assert needle in str(e.value)


def test_unknown_family_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="terminal_ops"):
        templates("terminal-ops")


def test_cli_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(capsys, "envs", "list", "--family", "terminal_ops", "--json")
    assert rc == 0
    rows = json.loads(out)["templates"]
    by_id = {r["id"]: r for r in rows}
    assert by_id["terminal_ops/git-revert-v1"]["horizons"] == {"1": "short", "2": "medium",
                                                              "3": "long"}
    assert by_id["terminal_ops/demo-move-v1"]["variants"] == list(VARIANTS)
    rc, out, _ = _cli(capsys, "envs", "list", "--tag", "demo", "--json")
    assert {r["id"] for r in json.loads(out)["templates"]} == {
        i for i in by_id if "/demo-" in i}


def test_cli_list_table(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(capsys, "envs", "list", "--family", "terminal_ops")
    assert rc == 0 and "log-rotate-v1" in out and "1:short 2:medium 3:long" in out


def test_cli_show_json_and_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, out, _ = _cli(capsys, "envs", "show", "terminal_ops/config-edit-v1", "--seed", "3",
                      "-d", "2", "--variant", "fault", "--json", "--out", str(tmp_path / "c"))
    assert rc == 0
    data = json.loads(out)
    card = make("terminal_ops/config-edit-v1", seed=3, difficulty=2, variant="fault")
    assert data["id"] == card.id and data["content_id"] == card.content_id()
    assert data["acceptance"]["tests"] == card.acceptance.tests
    assert data["solution"] == card.solution and "test_task.py" in data["test_files"]
    assert load_card(tmp_path / "c").content_id() == card.content_id()


def test_cli_show_text_keeps_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(capsys, "envs", "show", "terminal_ops/config-edit-v1")
    assert rc == 0 and "[" in out and "oracle solution" in out and "hidden tests" in out


def test_cli_show_unknown_template_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _cli(capsys, "envs", "show", "terminal_ops/log-rotat-v1")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "did you mean" in err


# --- secret entropy (issue 10, class 5: regenerating a card from source + seed) ----------

SECRET_CASES = ["terminal_ops/demo-copy-v1", "terminal_ops/log-aggregate-v1",
                "repo_refactor/fix-bug-v1", "repo_refactor/make-fast-v1"]


def _hidden(card) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(e.data for _, e in sorted(card.tests.items()))


@pytest.mark.parametrize("tid", SECRET_CASES)
def test_another_secret_makes_another_card(tid: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same (template, seed, difficulty, variant), two secrets: different expected values and
    names; the same secret twice: the identical card."""
    a = make(tid, seed=7)
    assert make(tid, seed=7).content_id() == a.content_id()
    monkeypatch.setenv("CEILING_SECRET", "ab" * 32)
    b = make(tid, seed=7)
    assert b.id == a.id and b.content_id() != a.content_id()
    assert _hidden(b) != _hidden(a) and b.instruction != a.instruction
    assert make(tid, seed=7).content_id() == b.content_id()


def test_regenerating_without_the_secret_misses_the_answers() -> None:
    """An agent with the generator source and the seed (the card id is no secret) rebuilds
    the card with the rng ``make`` used before secrets existed, or with any secret it can
    guess: the hidden tests it gets differ from the real card's."""
    import random

    from ceiling.envs import get_template

    tid = "repo_refactor/fix-bug-v1"
    real = make(tid, seed=3, difficulty=1)
    cls = get_template(tid)
    for rng in (random.Random(f"{tid}|3|1|train"), random.Random(3), random.Random(b"")):
        guess = cls().generate(rng, 1, "train")
        assert _hidden(guess) != _hidden(real)


def test_secret_file_is_created_once_0600(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    from ceiling.envs import _secret

    monkeypatch.delenv("CEILING_SECRET")
    monkeypatch.setenv("CEILING_HOME", str(tmp_path / "home"))
    a = make("terminal_ops/demo-move-v1", seed=1)
    path = tmp_path / "home" / "secret"
    assert path.stat().st_mode & 0o777 == 0o600 and len(path.read_bytes()) == 32
    assert [p.name for p in path.parent.iterdir()] == ["secret"]  # no temp file left behind
    assert make("terminal_ops/demo-move-v1", seed=1).content_id() == a.content_id()
    monkeypatch.setenv("CEILING_SECRET", path.read_bytes().hex())  # the same secret, shared
    assert make("terminal_ops/demo-move-v1", seed=1).content_id() == a.content_id()
    assert _secret.secret_fingerprint() and path.read_bytes().hex() not in repr(a.model_dump())


@pytest.mark.parametrize("bad", ["not-hex", "abcd"])
def test_bad_secret_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("CEILING_SECRET", bad)
    with pytest.raises(ConfigError, match="CEILING_SECRET"):
        make("terminal_ops/demo-move-v1", seed=1)


@pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")
def test_the_sandbox_sees_neither_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The agent's commands cannot read the secret: not from the environment (commands get
    an explicit one) and not from $CEILING_HOME/secret (not in the sandbox's root)."""
    from ceiling import SandboxUnavailable
    from ceiling.env import TaskEnv
    from ceiling.sandbox import open_sandbox

    try:
        open_sandbox([{}], backend="namespace").close()
    except SandboxUnavailable:
        pytest.skip("needs the namespace backend (the local backend isolates nothing)")
    env_secret = "5eed" * 16
    monkeypatch.setenv("CEILING_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CEILING_SECRET")
    card = make("terminal_ops/demo-copy-v1", seed=1)  # creates the file secret
    path = tmp_path / "home" / "secret"
    file_secret = path.read_bytes().hex()
    monkeypatch.setenv("CEILING_SECRET", env_secret)
    env = TaskEnv(card, backend="namespace")
    try:
        env.reset()
        obs, *_ = env.step({"tool": "run", "args": {
            "cmd": f"env; od -An -tx1 {path} | tr -d ' \\n'; ls -la {path.parent} /root/.ceiling"}})
    finally:
        env.close()
    text = str(obs).replace(" ", "")
    assert "PATH=" in text, text  # the command ran
    assert env_secret not in text and file_secret not in text
    assert "CEILING_SECRET" not in text
