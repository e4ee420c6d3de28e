"""Trajectory records: what one episode did, step by step, and how it was judged.

Written as one JSON object per line; the evaluator and the trainer read them back.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..verify import Outcome


@dataclass
class Turn:
    """One policy turn and the environment step it caused."""

    text: str  # what the policy wrote (the reply)
    token_ids: list[int] = field(default_factory=list)  # reply tokens (policy-written only)
    logprobs: list[float] = field(default_factory=list)  # sampling log-probs of token_ids
    prompt_token_ids: list[int] = field(default_factory=list)
    prompt: str | None = None  # rendered prompt text (line protocol) when kept
    action: dict[str, Any] | None = None  # {"tool", "args"}; None when the reply did not parse
    parse_error: str | None = None
    observation: str = ""
    step_reward: float = 0.0
    policy_s: float = 0.0
    env_s: float = 0.0


@dataclass
class Trajectory:
    """One episode as the rollout ran it: the card's identity and split, the policy, the
    harness fingerprint and sampling settings (so results are comparable), every
    :class:`Turn`, and the verdict (``outcome``, ``reward``, ``passed``, the full
    ``verdict`` dump). An episode the infrastructure broke has ``outcome`` ``infra_error``
    and ``error`` set. One JSON object per line (:meth:`to_json`); :meth:`from_dict` reads an
    unknown outcome string as ``infra_error``, the way the evaluator counts it."""

    episode_id: str
    card_id: str
    card_hash: str
    template: str | None
    type: str
    horizon: str
    difficulty: int
    split: str  # "train" | "heldout"
    feasible: bool
    faults: bool  # the card had injected faults
    seed: int  # episode seed (replayable)
    sample: int  # index of this sample among k for the card
    policy: str  # policy spec
    harness_fingerprint: str
    sampling: dict[str, Any]
    turns: list[Turn] = field(default_factory=list)
    outcome: Outcome = Outcome.INFRA_ERROR  # JSON: the plain string
    reward: float = 0.0
    passed: bool = False
    verdict: dict[str, Any] = field(default_factory=dict)  # Verdict.model_dump(mode="json")
    terminated: bool = False
    truncated: bool = False
    error: str | None = None  # infrastructure / policy crash message
    timings: dict[str, float] = field(default_factory=dict)  # policy_s, env_s, verify_s, total_s
    tokens: dict[str, int] = field(default_factory=dict)  # prompt, completion
    instruction: str = ""  # the card's instruction as the harness showed it

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        d = dict(d)
        d["turns"] = [Turn(**t) for t in d.get("turns", [])]
        o = d.get("outcome", Outcome.INFRA_ERROR)
        d["outcome"] = Outcome(o) if o in Outcome.__members__.values() else Outcome.INFRA_ERROR
        return cls(**d)

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        return cls.from_dict(json.loads(line))
