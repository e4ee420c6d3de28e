"""From scored trajectories to training tensors.

Each policy turn of an episode becomes one :class:`Sample`: the prompt token ids the policy
was conditioned on, the reply token ids it wrote, and the log-probs it sampled them with.
Every turn carries its episode's group-normalised advantage. Observations are never
trained on: they live only inside later turns' prompts, which are masked.

Filtering (difficulty filtering, part 1): a group whose rewards have no variance teaches
nothing under group normalisation and is dropped (counted); episodes that ended in
``infra_error`` are not the model's doing and are removed from their group first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..rollout import Trajectory
from ..verify import Outcome


@dataclass
class Sample:
    prompt_ids: list[int]
    completion_ids: list[int]
    old_logprobs: list[float]
    advantage: float
    episode_id: str = ""


@dataclass
class GroupStats:
    groups: int = 0
    kept: int = 0
    zero_variance: int = 0
    infra_errors: int = 0
    turns_skipped: int = 0  # turns without token ids / log-probs (cannot be trained on)
    rewards: list[float] = field(default_factory=list)
    passed: list[bool] = field(default_factory=list)


def samples_from_groups(groups: Sequence[Sequence[Trajectory]], *, eps: float = 1e-4,
                        min_std: float = 1e-6) -> tuple[list[Sample], GroupStats]:
    """Samples for every turn of every episode in a group with reward variance."""
    st = GroupStats(groups=len(groups))
    out: list[Sample] = []
    for group in groups:
        good = [t for t in group if t.outcome != Outcome.INFRA_ERROR]
        st.infra_errors += len(group) - len(good)
        st.rewards += [t.reward for t in good]
        st.passed += [t.passed for t in good]
        if len(good) < 2:
            st.zero_variance += 1
            continue
        r = torch.tensor([t.reward for t in good], dtype=torch.float64)
        std = float(r.std(unbiased=False))
        if std < min_std:
            st.zero_variance += 1
            continue
        st.kept += 1
        adv = ((r - r.mean()) / (std + eps)).tolist()
        for traj, a in zip(good, adv, strict=True):
            for turn in traj.turns:
                if not turn.token_ids or len(turn.logprobs) != len(turn.token_ids) or \
                        not turn.prompt_token_ids:
                    st.turns_skipped += 1
                    continue
                out.append(Sample(list(turn.prompt_token_ids), list(turn.token_ids),
                                  list(turn.logprobs), float(a), traj.episode_id))
    return out, st


@dataclass
class Batch:
    """Prompts left-padded to the longest prompt ``P``, completions right-padded to the
    longest completion ``C`` (TRL's layout): every completion starts at column ``P``, so
    the log-probs of all completion tokens are the last ``C`` scores of the sequence
    (:func:`~ceiling.train._loss.sequence_logprobs` with ``keep=C``) and the LM head runs on
    those positions only. Columns of ``mask``/``old_logp`` are completion token indices."""

    input_ids: torch.Tensor  # [B, P + C]
    attention_mask: torch.Tensor  # [B, P + C]
    mask: torch.Tensor  # [B, C] 1 on the sample's completion tokens
    old_logp: torch.Tensor  # [B, C] recorded sampling log-probs of those tokens
    advantages: torch.Tensor  # [B]

    @property
    def tokens(self) -> int:
        return int(self.mask.sum())

    @property
    def keep(self) -> int:
        """How many trailing scores hold completion tokens (``C``)."""
        return int(self.mask.shape[1])


def collate(samples: Sequence[Sample], pad_id: int, device: str | torch.device = "cpu") -> Batch:
    """Lay samples out as :class:`Batch` says (left-padded prompts, right-padded
    completions); ``mask``/``old_logp`` column ``j`` is completion token ``j``."""
    if not samples:
        raise ValueError("collate needs at least one sample")
    P = max(len(s.prompt_ids) for s in samples)
    C = max(len(s.completion_ids) for s in samples)
    B = len(samples)
    ids = torch.full((B, P + C), pad_id, dtype=torch.long)
    att = torch.zeros((B, P + C), dtype=torch.long)
    mask = torch.zeros((B, C), dtype=torch.float32)
    old = torch.zeros((B, C), dtype=torch.float32)
    for i, s in enumerate(samples):
        p, c = len(s.prompt_ids), len(s.completion_ids)
        ids[i, P - p:P + c] = torch.tensor(s.prompt_ids + s.completion_ids)
        att[i, P - p:P + c] = 1
        mask[i, :c] = 1.0
        old[i, :c] = torch.tensor(s.old_logprobs, dtype=torch.float32)
    adv = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
    return Batch(ids.to(device), att.to(device), mask.to(device), old.to(device), adv.to(device))


CHUNK_OVERHEAD_TOKENS = 128  # a model call's fixed cost, in padded tokens (tiny base, CPU)


def length_chunks(samples: Sequence[Sample], micro_batch: int,
                  overhead: int = CHUNK_OVERHEAD_TOKENS) -> list[list[Sample]]:
    """Split ``samples`` into micro-batches of at most ``micro_batch`` rows that waste
    little on padding: sorted by length, cut where the padded area saved pays for the
    extra model call (``overhead`` tokens per call). A GRPO step's completions range from
    a few tokens to the budget, and a batch is padded to its longest row, so one batch of
    everything spent about a third of the trainer's forward and backward on padding.
    Gradients are accumulated with per-token or per-sample weights that do not depend on
    how samples are grouped, so the update is the same up to float summation order."""
    if not samples:
        return []
    order = sorted(samples, key=lambda s: (len(s.prompt_ids) + len(s.completion_ids),
                                           len(s.completion_ids)))
    n = len(order)
    if n > 2048:  # keep planning cheap: fixed-size chunks of the sorted order
        return [order[i:i + micro_batch] for i in range(0, n, micro_batch)]
    P = [len(s.prompt_ids) for s in order]
    C = [len(s.completion_ids) for s in order]
    best = [0.0] + [float("inf")] * n  # best[j]: cost of the first j samples
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        mp = mc = 0
        for i in range(j - 1, max(-1, j - 1 - micro_batch), -1):  # chunk = order[i:j]
            mp, mc = max(mp, P[i]), max(mc, C[i])
            cost = best[i] + (j - i) * (mp + mc) + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    out: list[list[Sample]] = []
    j = n
    while j > 0:
        out.append(order[cut[j]:j])
        j = cut[j]
    return out[::-1]
