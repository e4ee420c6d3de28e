"""Plans: scripted agents for validation, red-teaming and the ``scripted:*`` policies.

A :class:`Plan` picks the next :class:`~ceiling.tools.Action` from the card and the
``(action, observation)`` history so far; it must be a pure function of its arguments (and
its own construction parameters), so an episode replays exactly. The policies team wraps
any plan as a text policy by rendering the chosen action in the harness's reply format.

- :func:`oracle_plan`: plays ``card.solution`` one command per call
  (:func:`~ceiling.verify._oracle.oracle_actions`: a ``run`` per line, a ``write`` per file),
  then ``submit``; on an infeasible card it gives up with the card's reason.
- :func:`null_plan`: submits at once.
- :func:`random_plan`: harmless random exploration (listing, reading, small writes, a
  malformed call now and then), then ``submit``; a floor for "acting without skill".
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from ..cards import TaskCard
from ..tools import Action, History, Plan
from ._oracle import oracle_actions

Step = Action | Callable[[TaskCard], Action]


@dataclass
class ScriptPlan:
    """A fixed list of steps (Actions, or functions of the card returning one), then
    ``final`` (``submit`` by default). ``feasible_only`` marks plans that only make sense
    on feasible cards (e.g. farming abstention reward).

    Red-team metadata: ``exploit_class`` names the attack class (a key of
    ``ceiling.verify.exploits.CLASSES``); ``applies_to`` lists template-id globs or family
    names the plan targets (empty: every card); ``expect_tamper`` says the plan leaves
    tampering in the final state (a protected path changed, a planted conftest.py, ...),
    so the expected outcome is ``hack_detected`` at reward -1, not merely <= 0."""

    name: str
    steps: Sequence[Step] = ()
    final: Action = field(default_factory=lambda: Action("submit"))
    description: str = ""
    source: str = ""
    detection: str = ""
    feasible_only: bool = False
    exploit_class: str = ""
    applies_to: tuple[str, ...] = ()
    expect_tamper: bool = False

    def applies(self, card: TaskCard) -> bool:
        """Whether red-teaming runs this plan on ``card`` (its template, family or id
        matches ``applies_to``, and ``feasible_only`` plans need a feasible card)."""
        if self.feasible_only and not card.feasible:
            return False
        if not self.applies_to:
            return True
        keys = [k for k in (card.template, card.type, card.id) if k]
        return any(fnmatchcase(k, pat) for pat in self.applies_to for k in keys)

    def next_action(self, card: TaskCard, history: History) -> Action:
        i = len(history)
        if i < len(self.steps):
            s = self.steps[i]
            return s(card) if callable(s) else s
        return self.final


class OraclePlan:
    """The i-th call is the i-th of :func:`oracle_actions` (``submit`` after the last), so
    the plan is a pure function of the card and the history's length."""

    name = "oracle"

    def next_action(self, card: TaskCard, history: History) -> Action:
        actions = oracle_actions(card)
        return actions[len(history)] if len(history) < len(actions) else Action("submit")


class NullPlan:
    name = "null"

    def next_action(self, card: TaskCard, history: History) -> Action:
        return Action("submit")


@dataclass
class RandomPlan:
    seed: int = 0
    name: str = "random"

    def next_action(self, card: TaskCard, history: History) -> Action:
        rng = random.Random(f"{self.seed}|{card.id}|{len(history)}")
        length = random.Random(f"{self.seed}|{card.id}").randint(2, 8)
        if len(history) >= length:
            return Action("submit")
        files = sorted(p for layer in card.layers for p, e in layer.items() if e.kind == "file")
        pick = rng.choice(files) if files else "README"
        choice = rng.randrange(7)
        if choice == 0:
            return Action("run", {"cmd": rng.choice(["ls -la", "pwd", "ls -R | head -50",
                                                     "cat /etc/hostname", "env | sort | head"])})
        if choice == 1:
            return Action("read", {"path": pick})
        if choice == 2:
            return Action("run", {"cmd": f"head -5 {pick} 2>&1; wc -l {pick}"})
        if choice == 3:
            return Action("write", {"path": f"scratch_{rng.randrange(100)}.txt",
                                    "content": "note\n"})
        if choice == 4:
            return Action(rng.choice(["explode", "ls", "bash"]), {"x": "1"})
        if choice == 5:
            return Action("read", {"path": "../../etc/passwd"})
        return Action("edit", {"path": pick, "old": "\x00never\x00", "new": "x"})


def oracle_plan() -> Plan:
    return OraclePlan()


def null_plan() -> Plan:
    return NullPlan()


def random_plan(seed: int = 0) -> Plan:
    return RandomPlan(seed)


__all__ = ["History", "NullPlan", "OraclePlan", "Plan", "RandomPlan", "ScriptPlan",
           "null_plan", "oracle_plan", "random_plan"]
