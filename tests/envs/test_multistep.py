"""The multistep demo suite: the oracle (one command per call, then submit) is solved and
the null policy (submit at once) fails through the real TaskEnv and verifier; every step
done earns partial credit; held-out variants use names and extensions train never does;
the in-memory simulation of a chain agrees with the shell."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from ceiling.envs import make
from ceiling.envs._common import EXTS_HELDOUT, WORDS_HELDOUT, WORDS_TRAIN
from ceiling.envs.terminal_ops import MULTISTEP_TEMPLATES
from ceiling.envs.terminal_ops._multistep import apply, make_chain

TIDS = [t.template_id() for t in MULTISTEP_TEMPLATES]


def _backend() -> str:
    from ceiling import SandboxUnavailable
    from ceiling.sandbox import open_sandbox

    try:
        open_sandbox([{}], backend="namespace").close()
        return "namespace"
    except SandboxUnavailable:
        return "local"


def _commands(card) -> list[str]:  # type: ignore[no-untyped-def]
    return [ln for ln in card.solution.splitlines() if ln.strip() and ln != "set -e"]


@pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")
@pytest.mark.parametrize("variant", ["train", "heldout", "fault"])
def test_oracle_solves_null_fails_partial_credit_through_taskenv(variant: str) -> None:
    from ceiling.env import TaskEnv
    from ceiling.verify import Outcome

    backend = _backend()
    for tid in TIDS:
        card = make(tid, seed=21, variant=variant)
        cmds = _commands(card)
        assert len(cmds) == 1 + TIDS.index(tid) + 1, (card.id, cmds)  # 2, 3, 4 commands
        env = TaskEnv(card, backend=backend)
        try:
            env.reset()
            for cmd in cmds:  # one command per call, as a policy plays it
                _, _, term, _, _ = env.step({"tool": "run", "args": {"cmd": cmd}})
                assert not term
            *_, info = env.step({"tool": "submit", "args": {}})
            assert info["verdict"].outcome == Outcome.SOLVED, (card.id, info["verdict"])
            env.reset()
            _, reward, term, _, info = env.step({"tool": "submit", "args": {}})
            assert term and reward <= 0 and info["verdict"].outcome == Outcome.FAILED
            if variant == "train" and len(card.acceptance.tests) > 1:
                # the first command alone: some tests pass, not all (credit per step)
                env.reset()
                env.step({"tool": "run", "args": {"cmd": cmds[0]}})
                _, reward, _, _, info = env.step({"tool": "submit", "args": {}})
                assert info["verdict"].outcome == Outcome.FAILED
                assert 0 < reward < 1, (card.id, reward, info["verdict"].tests)
        finally:
            env.close()


@pytest.mark.filterwarnings("ignore::ceiling.sandbox.LocalSandboxWarning")
def test_infeasible_twin_gives_up_correctly() -> None:
    from ceiling.env import TaskEnv
    from ceiling.verify import Outcome

    card = make(TIDS[1], seed=4, variant="infeasible")
    assert not card.feasible and "keep.txt" in card.instruction
    env = TaskEnv(card, backend=_backend())
    try:
        env.reset()
        *_, info = env.step({"tool": "give_up", "args": {"reason": card.infeasible_reason}})
        assert info["verdict"].outcome == Outcome.ABSTAINED_CORRECT
    finally:
        env.close()


def _words(card) -> set[str]:  # type: ignore[no-untyped-def]
    return set(re.findall(r"[a-z]+", card.instruction + " " + " ".join(card.workspace)))


@pytest.mark.parametrize("tid", TIDS)
def test_heldout_variant_differs_from_train(tid: str) -> None:
    held = set(WORDS_HELDOUT) | set(EXTS_HELDOUT)
    train: set[str] = set()
    for seed in range(40):
        for v in ("train", "fault", "infeasible"):
            train |= _words(make(tid, seed=seed, variant=v))
        h = make(tid, seed=seed, variant="heldout")
        assert _words(h) & held and h.instruction != make(tid, seed=seed).instruction
    assert not train & held
    assert train & set(WORDS_TRAIN)


def test_simulation_matches_the_shell(tmp_path: Path) -> None:
    """What :func:`apply` predicts is what ``sh`` does with the demo commands."""
    import random

    rng = random.Random(3)
    for i in range(12):
        ch = make_chain(rng, WORDS_TRAIN, ("txt", "md"), 4)
        ws = tmp_path / str(i)
        ws.mkdir()
        for p, text in ch.start.items():
            (ws / p).write_text(text)
        fs = dict(ch.start)
        for step in ch.steps:
            apply(fs, step)
            subprocess.run(["sh", "-c", step.command], cwd=ws, check=True)
        assert fs == ch.end
        got = {p.name: p.read_text() for p in ws.iterdir()}
        assert {p: (t.strip() if p in ch.counted else t) for p, t in got.items()} == \
            {p: (t.strip() if p in ch.counted else t) for p, t in ch.end.items()}
