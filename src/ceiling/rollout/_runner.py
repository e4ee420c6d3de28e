"""The rollout runner: many episodes at once, one policy batch per round.

:class:`Rollout` (one :class:`RolloutSpec`) runs named phases until every episode ended:
*fill* starts queued episodes until ``concurrency`` are live, *policy round* sends the
pending turn of every live episode to the policy as ONE batch (on the driver), *step round*
parses the replies and runs the environment steps on the executor (``local``: a thread pool
here, sandbox commands are subprocesses so threads overlap them; ``ray``: worker actors on
a cluster, :mod:`ceiling.rollout._ray`), *finish* records an ended episode.
:func:`run_episodes` is the keyword door to it.

Seeds: each episode's seed is derived from (run seed, card id, sample index), and the
environment is reset with it, so an episode replays exactly for a scripted policy. Model
sampling is seeded per round from the run seed; with a batched model the draws also depend
on which episodes share the batch, so a model run replays exactly only with the same cards,
``k`` and ``concurrency``.

Resume: with ``out``, every finished episode is appended to the JSONL file at once (one
write + fsync). A rerun with the same file skips the episode ids already there (and refuses
a file written with another policy, harness or seed; an episode whose stored card hash
differs from the card being run, e.g. after a changed ``CEILING_SECRET``, runs again).
Faults: an episode lost with its Ray worker or node is re-run from the card's initial state
(``RunStats.retried``; at most ``max_retries`` times) and written once. Failures: a policy exception marks
that round's episodes ``infra_error`` and the run goes on; an unreachable endpoint
(:class:`~ceiling.PolicyError`) stops the run after saving what finished; a reply that does
not parse is a failed step (the observation says why, the step counts against the budget).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import ConfigError, PolicyError
from ..cards import TaskCard
from ..harness import Dialogue, Harness, HarnessConfig, ReplyError, default_format
from ..policies import Generation, Policy, SamplingParams
from ..tools import Action
from ..verify import Outcome, RewardSpec
from ._executor import EnvConfig, Executor, Failed, Lost, Ok, Straggler, make_executor
from ._jsonl import JsonlWriter, read_trajectories
from ._progress import RunProgress
from ._types import Trajectory, Turn

# what a failed parse sends to the env: a tool no card has, so the step fails and counts
UNPARSEABLE = {"tool": "<unparseable reply>", "args": {}}
EnvFactory = Callable[..., Any]


def episode_seed(run_seed: int, card_id: str, sample: int) -> int:
    """A 32-bit seed derived from the run seed, the card and the sample index."""
    h = hashlib.sha256(f"{run_seed}|{card_id}|{sample}".encode()).digest()
    return int.from_bytes(h[:4], "big")


def episode_id(card: TaskCard, sample: int) -> str:
    return f"{card.id}#{sample}"


@dataclass
class RunStats:
    """Wall-clock accounting of one run (``bench rollout`` reads it)."""

    wall_s: float = 0.0
    policy_s: float = 0.0  # inside policy.generate
    env_s: float = 0.0  # env reset/step wall time (the pool's rounds, not the sum)
    harness_s: float = 0.0  # rendering prompts + parsing replies
    rounds: int = 0
    steps: int = 0
    episodes: int = 0
    skipped: int = 0  # already in the out file
    retried: int = 0  # re-runs of episodes whose worker or node died (one episode lost
    # twice counts twice; each trajectory's timings['retries'] holds its own count)
    stragglers: int = 0  # episodes cancelled past their timeout (ray executor)
    executor: str = "local"


@dataclass
class _Live:
    card: TaskCard
    sample: int
    seed: int
    eid: str
    dialogue: Dialogue | None = None
    traj: Trajectory | None = None
    t0: float = field(default_factory=time.monotonic)
    card_hash: str = ""
    req: Any = None  # this round's PolicyRequest
    retries: int = 0  # times this episode was lost with its worker


def _harness_for(harness: Harness | HarnessConfig | None, policy: Policy) -> Harness:
    tok = getattr(policy, "tokenizer", None)
    if isinstance(harness, Harness):
        if harness.tokenizer is None and tok is not None:
            return Harness(harness.config, tokenizer=tok)
        return harness
    if harness is None:  # the one chooser, as ceiling eval uses it
        harness = HarnessConfig(format=default_format(tok))  # type: ignore[arg-type]
    return Harness(harness, tokenizer=tok)


def _sampling_for(sampling: SamplingParams | None, h: Harness) -> SamplingParams:
    sp = sampling or SamplingParams(max_new_tokens=h.config.max_reply_tokens)
    stop = tuple(dict.fromkeys([*sp.stop, *h.config.stop_strings]))
    return dataclasses.replace(sp, stop=stop)


def _new_traj(lv: _Live, policy: Policy, h: Harness, sp: SamplingParams) -> Trajectory:
    c = lv.card
    return Trajectory(
        episode_id=lv.eid, card_id=c.id, card_hash=lv.card_hash or c.content_id(), template=c.template,
        type=c.type, horizon=c.horizon, difficulty=c.difficulty, split=c.split,
        feasible=c.feasible, faults=bool(c.faults), seed=lv.seed, sample=lv.sample,
        policy=policy.spec, harness_fingerprint=h.fingerprint,
        sampling=dataclasses.asdict(sp) | {"stop": list(sp.stop)}, instruction=c.instruction,
    )


@dataclass
class RolloutSpec:
    """Everything one rollout needs (see :func:`run_episodes` for the meaning of each)."""

    cards: Sequence[TaskCard]
    policy: Policy
    harness: Harness | HarnessConfig | None = None
    k: int = 1
    sampling: SamplingParams | None = None
    backend: str = "namespace"
    out: str | os.PathLike[str] | None = None
    workers: int = 8
    concurrency: int = 32
    seed: int = 0
    reward_spec: RewardSpec | None = None
    limits: Any = None
    progress: bool = True
    env_factory: EnvFactory | None = None
    stats: RunStats | None = None
    retry_infra: bool = False
    executor: str | Executor = "local"
    ray_address: str | None = None
    max_retries: int = 3  # re-runs of an episode lost with its worker, then infra_error


class Rollout:
    """One run of a suite: ``run()`` loops over the named phases until every episode ended.

    - :meth:`fill` starts queued episodes until ``concurrency`` are live (resets run on the
      executor);
    - :meth:`policy_round` sends the pending turn of every live episode as ONE batch;
    - :meth:`step_round` parses the replies and runs the steps on the executor;
    - :meth:`finish` records an ended episode (JSONL, progress, policy state).

    An episode the executor lost (its worker or node died) goes back to the front of the
    queue and starts again from the card's initial state (``stats.retried``); its record is
    written once, when it ends.
    """

    def __init__(self, spec: RolloutSpec) -> None:
        if spec.k < 1:
            raise ConfigError(f"k={spec.k} must be at least 1",
                              fix="sample each card once or more")
        if spec.concurrency < 1 or spec.workers < 1:
            raise ConfigError("concurrency and workers must be at least 1")
        self.spec = spec
        self.policy = spec.policy
        self.h = _harness_for(spec.harness, spec.policy)
        self.sp = _sampling_for(spec.sampling, self.h)
        self.st = spec.stats if spec.stats is not None else RunStats()
        hashes = {id(c): c.content_id() for c in spec.cards}
        self.todo = [_Live(c, s, episode_seed(spec.seed, c.id, s), episode_id(c, s),
                           card_hash=hashes[id(c)])
                     for c in spec.cards for s in range(spec.k)]
        seen: set[str] = set()
        for lv in self.todo:
            if lv.eid in seen:
                raise ConfigError(f"card {lv.card.id!r} appears twice in the suite",
                                  fix="pass each card once and use k for repeats")
            seen.add(lv.eid)
        done: dict[str, Trajectory] = {}
        if spec.out is not None:
            done = _resume(Path(spec.out), self.todo, spec.policy, self.h)
            if spec.retry_infra:
                done = {k: v for k, v in done.items() if v.outcome != Outcome.INFRA_ERROR}
        self.st.skipped = len(done)
        self.results: dict[str, Trajectory] = dict(done)
        self.queue: deque[_Live] = deque(lv for lv in self.todo if lv.eid not in done)
        self.live: dict[str, _Live] = {}  # insertion order = batch order
        self.executor = make_executor(spec.executor, workers=spec.workers,
                                      ray_address=spec.ray_address,
                                      concurrency=spec.concurrency)
        self.st.executor = self.executor.name
        self._done_at_start = list(done.values())
        self._written: set[str] = set()
        self._policy_dt = 0.0
        self.writer: JsonlWriter | None = None
        self.bar: RunProgress | None = None

    # ------------------------------------------------------------------ phases
    def fill(self) -> None:
        """Start queued episodes until ``concurrency`` are live."""
        cap = self.executor.capacity()
        room = min(self.spec.concurrency, cap if cap is not None else self.spec.concurrency)
        batch: list[_Live] = []
        while self.queue and len(self.live) + len(batch) < room:
            lv = self.queue.popleft()
            lv.t0 = time.monotonic()
            lv.traj = _new_traj(lv, self.policy, self.h, self.sp)
            lv.dialogue = self.h.start(lv.card)
            batch.append(lv)
        if not batch:
            return
        t = time.monotonic()
        res = self.executor.start([(lv.eid, lv.card, lv.seed) for lv in batch])
        for lv, r in zip(batch, res, strict=True):
            if isinstance(r, Ok):
                self.live[lv.eid] = lv
            elif isinstance(r, Lost):
                self._retry(lv, r.reason)
            elif isinstance(r, Straggler):
                self._straggler(lv, r)
            else:
                self.finish(lv, error=f"environment failed to start: "
                                      f"{type(r.error).__name__}: {r.error}")
        self.st.env_s += time.monotonic() - t

    def policy_round(self) -> list[Generation] | None:
        """One batch for every live episode; None when the policy crashed (the round's
        episodes are infra_error). A :class:`PolicyError` stops the run."""
        st, sp = self.st, self.sp
        t = time.monotonic()
        for lv in self.live.values():
            assert lv.dialogue is not None
            lv.req = lv.dialogue.request()
            lv.req.context.update(episode_id=lv.eid, seed=lv.seed)
        st.harness_s += time.monotonic() - t
        # one sampling seed per round, from the run seed (and the user's, if any)
        round_sp = dataclasses.replace(
            sp, seed=(((sp.seed or 0) * 1_000_003) ^ (self.spec.seed * 7_919) + st.rounds)
            % 2**31)
        reqs = [lv.req for lv in self.live.values()]
        t = time.monotonic()
        try:
            gens = self.policy.generate(reqs, round_sp)
            if len(gens) != len(reqs):
                raise RuntimeError(f"policy returned {len(gens)} generations for "
                                   f"{len(reqs)} requests")
        except PolicyError:
            raise
        except Exception as e:  # noqa: BLE001 - a policy crash fails this round's episodes
            msg = f"policy crashed: {type(e).__name__}: {e}"
            for lv in list(self.live.values()):
                self.finish(lv, error=msg)
            self.live.clear()
            return None
        self._policy_dt = time.monotonic() - t
        st.policy_s += self._policy_dt
        st.rounds += 1
        return list(gens)

    def step_round(self, gens: Sequence[Generation]) -> None:
        """Parse each reply (harness) and run the steps (executor)."""
        st = self.st
        live = list(self.live.values())
        self.live = {}
        share = self._policy_dt / len(live) if live else 0.0
        t = time.monotonic()
        stepping: list[tuple[_Live, Generation, Action | None, str | None]] = []
        for lv, g in zip(live, gens, strict=True):
            if g.error is not None:
                _record(lv, g, lv.req, None, None, "", share, 0.0, self.h, ended=True)
                self.finish(lv, error=f"policy error: {g.error}")
                continue
            action, perr = _parse(lv, g)
            stepping.append((lv, g, action, perr))
        st.harness_s += time.monotonic() - t
        t = time.monotonic()
        res = self.executor.step([(lv.eid, a if a is not None else dict(UNPARSEABLE))
                                  for lv, _g, a, _e in stepping])
        for (lv, g, action, perr), r in zip(stepping, res, strict=True):
            if isinstance(r, Lost):
                self._retry(lv, r.reason)
                continue
            if isinstance(r, Straggler):
                self._straggler(lv, r)
                continue
            if isinstance(r, Failed):
                e = r.error
                _record(lv, g, lv.req, action, perr, f"[error] {e}", share, 0.0, self.h)
                self.finish(lv, error=f"environment step failed: {type(e).__name__}: {e}")
                continue
            obs, _rew, term, trunc, info, env_dt = r.value
            st.steps += 1
            _record(lv, g, lv.req, action, perr, obs, share, env_dt, self.h, ended=bool(term))
            if term or trunc:
                assert lv.traj is not None
                lv.traj.terminated, lv.traj.truncated = bool(term), bool(trunc)
                self.finish(lv, info=info)
            else:
                self.live[lv.eid] = lv
        st.env_s += time.monotonic() - t

    def finish(self, lv: _Live, *, error: str | None = None,
               info: dict[str, Any] | None = None) -> None:
        """Record an ended episode: its JSONL line (once), the policy's state, progress."""
        tr = lv.traj
        assert tr is not None
        if error is not None:
            tr.outcome, tr.reward, tr.passed, tr.error = Outcome.INFRA_ERROR, 0.0, False, error
        elif info is not None and "verdict" in info:
            v = info["verdict"]
            tr.outcome, tr.reward, tr.passed = Outcome(v.outcome), float(v.reward), bool(v.passed)
            tr.verdict = v.model_dump(mode="json")
            tr.timings["verify_s"] = float(v.duration_s)
        else:
            tr.outcome, tr.error = Outcome.INFRA_ERROR, "the environment ended without a verdict"
        tr.timings["total_s"] = time.monotonic() - lv.t0
        tr.timings.setdefault("policy_s", 0.0)
        tr.timings.setdefault("env_s", 0.0)
        if lv.retries:
            tr.timings["retries"] = float(lv.retries)
        assert lv.eid not in self._written, f"episode {lv.eid} finished twice"
        self._written.add(lv.eid)
        self.results[lv.eid] = tr
        if self.writer is not None:
            self.writer.write(tr)
        self.executor.close(lv.eid)
        self._end_policy_episode(lv.eid)
        self.st.episodes += 1
        if self.bar is not None:
            self.bar.advance(tr)

    # ------------------------------------------------------------------ faults
    def _retry(self, lv: _Live, reason: str) -> None:
        lv.retries += 1
        self._end_policy_episode(lv.eid)
        if lv.retries > self.spec.max_retries:
            self.finish(lv, error=f"the episode was lost with its worker {lv.retries} times "
                                  f"(last: {reason})")
            return
        self.st.retried += 1
        lv.traj, lv.dialogue, lv.req = None, None, None
        self.queue.appendleft(lv)

    def _straggler(self, lv: _Live, r: Straggler) -> None:
        self.st.stragglers += 1
        if lv.traj is None:
            lv.traj = _new_traj(lv, self.policy, self.h, self.sp)
        self.finish(lv, error=f"straggler: no answer within the episode timeout + "
                              f"{r.after_s:g} s; cancelled")

    def _end_policy_episode(self, eid: str) -> None:
        end = getattr(self.policy, "end_episode", None)
        if callable(end):
            end(eid)

    # ------------------------------------------------------------------ the loop
    def run(self) -> list[Trajectory]:
        """Run every queued episode; every trajectory (resumed ones too), by card then
        sample."""
        st = self.st
        t_run = time.monotonic()
        try:
            if self.spec.out is not None:
                self.writer = JsonlWriter(self.spec.out)
            self.bar = RunProgress(total=len(self.todo), done=self._done_at_start,
                                   enabled=self.spec.progress)
            if self.queue:
                self.executor.open(EnvConfig(self.spec.backend,
                                             self.spec.reward_spec or RewardSpec(),
                                             self.spec.limits, self.spec.env_factory))
            while self.queue or self.live:
                self.fill()
                if not self.live:
                    continue
                gens = self.policy_round()
                if gens is not None:
                    self.step_round(gens)
        finally:
            self.executor.shutdown()
            if self.writer is not None:
                self.writer.close()
            if self.bar is not None:
                self.bar.close()
            st.wall_s += time.monotonic() - t_run
        return [self.results[lv.eid] for lv in self.todo if lv.eid in self.results]


def run_episodes(cards: Sequence[TaskCard], policy: Policy,
                 harness: Harness | HarnessConfig | None = None, *, k: int = 1,
                 sampling: SamplingParams | None = None, backend: str = "namespace",
                 out: str | os.PathLike[str] | None = None, workers: int = 8,
                 concurrency: int = 32, seed: int = 0, reward_spec: RewardSpec | None = None,
                 limits: Any = None, progress: bool = True, env_factory: EnvFactory | None = None,
                 stats: RunStats | None = None, retry_infra: bool = False,
                 executor: str | Executor = "local",
                 ray_address: str | None = None) -> list[Trajectory]:
    """Run ``k`` episodes per card and return every trajectory (including ones a resumed
    ``out`` file already held), ordered by card then sample.

    ``harness``: a Harness or HarnessConfig (default: json, or line for a model whose
    tokenizer has no chat template). ``sampling``: defaults to the harness's reply limit;
    the harness's stop strings are always added. ``env_factory(card, backend=,
    reward_spec=, limits=)`` replaces :class:`ceiling.env.TaskEnv` (tests, benchmarks; it
    must be picklable for the Ray executor). ``stats`` (a :class:`RunStats`) is filled with
    the run's time accounting. ``retry_infra``: on resume, rerun episodes the file holds as
    ``infra_error`` (their new record is appended; readers keep the last record of an id).
    ``executor``: ``local`` (threads here, ``workers`` of them) or ``ray`` (worker actors on
    the cluster at ``ray_address``; see :mod:`ceiling.rollout._ray`).
    """
    return Rollout(RolloutSpec(
        cards=cards, policy=policy, harness=harness, k=k, sampling=sampling, backend=backend,
        out=out, workers=workers, concurrency=concurrency, seed=seed, reward_spec=reward_spec,
        limits=limits, progress=progress, env_factory=env_factory, stats=stats,
        retry_infra=retry_infra, executor=executor, ray_address=ray_address)).run()


def _parse(lv: _Live, g: Generation) -> tuple[Action | None, str | None]:
    assert lv.dialogue is not None
    try:
        return lv.dialogue.parse(g.text, finish_reason=g.finish_reason), None
    except ReplyError as e:
        return None, str(e)


def _record(lv: _Live, g: Generation, req: Any, action: Action | None, perr: str | None,
            obs: str, policy_s: float, env_s: float, h: Harness, *, ended: bool = False) -> None:
    """Append the turn to the dialogue (what the model will see) and the trajectory."""
    assert lv.dialogue is not None and lv.traj is not None
    if perr is not None:
        body = lv.dialogue.add(g.text, None, "", error=perr)
    elif ended:
        body = lv.dialogue.add(g.text, action, obs, raw=True)
    else:
        body = lv.dialogue.add(g.text, action, obs)
    tr = lv.traj
    tr.turns.append(Turn(
        text=g.text, token_ids=list(g.token_ids), logprobs=list(g.logprobs),
        prompt_token_ids=list(g.prompt_token_ids),
        prompt=req.prompt if h.config.keep_prompts else None,
        action={"tool": action.tool, "args": action.args} if action is not None else None,
        parse_error=perr, observation=body, policy_s=policy_s, env_s=env_s,
    ))
    tr.timings["policy_s"] = tr.timings.get("policy_s", 0.0) + policy_s
    tr.timings["env_s"] = tr.timings.get("env_s", 0.0) + env_s
    tr.tokens["prompt"] = tr.tokens.get("prompt", 0) + (
        len(g.prompt_token_ids) or g.usage.get("prompt_tokens", 0))
    tr.tokens["completion"] = tr.tokens.get("completion", 0) + (
        len(g.token_ids) or g.usage.get("completion_tokens", 0))


def _resume(path: Path, todo: list[_Live], policy: Policy, h: Harness) -> dict[str, Trajectory]:
    """Finished episodes of ``path`` that this run may keep: same policy, harness and seed
    (else a ConfigError) and the same card content (else the episode runs again and its
    new record, appended, is the one readers keep)."""
    if not path.is_file():
        return {}
    want = {lv.eid: lv for lv in todo}
    done: dict[str, Trajectory] = {}
    for tr in read_trajectories(path):
        lv = want.get(tr.episode_id)
        if lv is None:
            continue
        if tr.policy != policy.spec or tr.harness_fingerprint != h.fingerprint \
                or tr.seed != lv.seed:
            what = ("policy" if tr.policy != policy.spec else
                    "harness" if tr.harness_fingerprint != h.fingerprint else "seed")
            raise ConfigError(f"{path} holds episodes from a run with another {what} "
                              f"({tr.episode_id})", where=str(path),
                              fix="resume with the same settings or write to a new --out file")
        if tr.card_hash != lv.card_hash:
            continue  # the card changed since (files, secret, fields): run it again
        done[tr.episode_id] = tr
    return done


def map_jobs(fn: Callable[[Any], Any], jobs: Sequence[Any], *, workers: int = 2,
             executor: str = "local", ray_address: str | None = None,
             progress: Callable[[int], None] | None = None) -> list[Any]:
    """``fn`` over ``jobs`` (results in job order) on the chosen executor: ``local`` threads
    (``workers`` of them) or ``ray`` tasks (``fn`` and the jobs must be picklable; a job
    whose worker dies is re-run by Ray, so ``fn`` must be a pure function of its job)."""
    ex = make_executor(executor, workers=max(1, workers), ray_address=ray_address)
    try:
        return ex.map(fn, jobs, progress)
    finally:
        ex.shutdown()
