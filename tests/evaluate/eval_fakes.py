"""Synthetic trajectories for evaluator tests (a test seam, not a model)."""

from __future__ import annotations

from ceiling.rollout import Trajectory, Turn


def traj(card_id: str, sample: int = 0, outcome: str = "solved", *, type: str = "terminal_ops",
         horizon: str = "short", split: str = "train", feasible: bool = True,
         faults: bool = False, steps: int = 3, tokens: int = 10, seconds: float = 1.0,
         policy: str = "scripted:oracle") -> Trajectory:
    passed = outcome in ("solved", "abstained_correct")
    turns = [Turn(text=f"run: echo {i}", action={"tool": "run", "args": {"cmd": f"echo {i}"}},
                  observation=f"| {i}") for i in range(steps - 1)]
    turns.append(Turn(text="submit", action={"tool": "submit", "args": {}}, observation=""))
    return Trajectory(
        episode_id=f"{card_id}#{sample}", card_id=card_id, card_hash="h" + card_id[-4:],
        template=card_id.split("@")[0], type=type, horizon=horizon, difficulty=1, split=split,
        feasible=feasible, faults=faults, seed=sample, sample=sample, policy=policy,
        harness_fingerprint="fp", sampling={"temperature": 1.0}, turns=turns,
        outcome=outcome, reward=1.0 if passed else 0.0, passed=passed,
        verdict={"outcome": outcome, "verifier_version": "1"},
        timings={"total_s": seconds}, tokens={"prompt": tokens // 2, "completion": tokens // 2})


def card_runs(card_id: str, outcomes: list[str], **kw: object) -> list[Trajectory]:
    return [traj(card_id, i, o, **kw) for i, o in enumerate(outcomes)]  # type: ignore[arg-type]
