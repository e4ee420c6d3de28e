"""The rollout runner: many episodes at once, one policy batch per round.

Each round, the pending turn of every live episode goes to the policy as ONE batch; the
resulting environment steps run in a thread pool (sandbox commands are subprocesses, so
threads overlap them). Up to ``concurrency`` episodes are live at once; a finished episode
is replaced by the next pending one.

Seeds: each episode's seed is derived from (run seed, card id, sample index), and the
environment is reset with it, so an episode replays exactly for a scripted policy. Model
sampling is seeded per round from the run seed; with a batched model the draws also depend
on which episodes share the batch, so a model run replays exactly only with the same cards,
``k`` and ``concurrency``.

Resume: with ``out``, every finished episode is appended to the JSONL file at once (one
write + fsync). A rerun with the same file skips the episode ids already there (and refuses
a file written with another policy, harness or seed). Failures: a policy exception marks
that round's episodes ``infra_error`` and the run goes on; an unreachable endpoint
(:class:`~ceiling.PolicyError`) stops the run after saving what finished; a reply that does
not parse is a failed step (the observation says why, the step counts against the budget).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import ConfigError, PolicyError
from ..cards import TaskCard
from ..harness import Dialogue, Harness, HarnessConfig, ReplyError
from ..policies import Generation, Policy, SamplingParams
from ..tools import Action
from ..verify import RewardSpec
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


@dataclass
class _Live:
    card: TaskCard
    sample: int
    seed: int
    eid: str
    env: Any = None
    dialogue: Dialogue | None = None
    traj: Trajectory | None = None
    t0: float = field(default_factory=time.monotonic)
    pending: Any = None  # (Generation, Action | None, error, policy_s)


def _harness_for(harness: Harness | HarnessConfig | None, policy: Policy) -> Harness:
    tok = getattr(policy, "tokenizer", None)
    if isinstance(harness, Harness):
        if harness.tokenizer is None and tok is not None:
            return Harness(harness.config, tokenizer=tok)
        return harness
    if harness is None:
        fmt = "json"
        if tok is not None and not getattr(tok, "chat_template", None):
            fmt = "line"
        harness = HarnessConfig(format="line" if fmt == "line" else "json")
    return Harness(harness, tokenizer=tok)


def _sampling_for(sampling: SamplingParams | None, h: Harness) -> SamplingParams:
    sp = sampling or SamplingParams(max_new_tokens=h.config.max_reply_tokens)
    stop = tuple(dict.fromkeys([*sp.stop, *h.config.stop_strings]))
    return dataclasses.replace(sp, stop=stop)


def _new_traj(lv: _Live, policy: Policy, h: Harness, sp: SamplingParams) -> Trajectory:
    c = lv.card
    return Trajectory(
        episode_id=lv.eid, card_id=c.id, card_hash=c.content_id(), template=c.template,
        type=c.type, horizon=c.horizon, difficulty=c.difficulty, split=c.split,
        feasible=c.feasible, faults=bool(c.faults), seed=lv.seed, sample=lv.sample,
        policy=policy.spec, harness_fingerprint=h.fingerprint,
        sampling=dataclasses.asdict(sp) | {"stop": list(sp.stop)}, instruction=c.instruction,
    )


def run_episodes(cards: Sequence[TaskCard], policy: Policy,
                 harness: Harness | HarnessConfig | None = None, *, k: int = 1,
                 sampling: SamplingParams | None = None, backend: str = "namespace",
                 out: str | os.PathLike[str] | None = None, workers: int = 8,
                 concurrency: int = 32, seed: int = 0, reward_spec: RewardSpec | None = None,
                 limits: Any = None, progress: bool = True, env_factory: EnvFactory | None = None,
                 stats: RunStats | None = None, retry_infra: bool = False) -> list[Trajectory]:
    """Run ``k`` episodes per card and return every trajectory (including ones a resumed
    ``out`` file already held), ordered by card then sample.

    ``harness``: a Harness or HarnessConfig (default: json, or line for a model whose
    tokenizer has no chat template). ``sampling``: defaults to the harness's reply limit;
    the harness's stop strings are always added. ``env_factory(card, backend=,
    reward_spec=, limits=)`` replaces :class:`ceiling.env.TaskEnv` (tests, benchmarks).
    ``stats`` (a :class:`RunStats`) is filled with the run's time accounting.
    ``retry_infra``: on resume, rerun episodes the file holds as ``infra_error`` (their new
    record is appended; readers keep the last record of an id).
    """
    if k < 1:
        raise ConfigError(f"k={k} must be at least 1", fix="sample each card once or more")
    if concurrency < 1 or workers < 1:
        raise ConfigError("concurrency and workers must be at least 1")
    h = _harness_for(harness, policy)
    sp = _sampling_for(sampling, h)
    rs = reward_spec or RewardSpec()
    st = stats if stats is not None else RunStats()
    if env_factory is None:
        from ..env import TaskEnv

        env_factory = TaskEnv
    todo = [_Live(c, s, episode_seed(seed, c.id, s), episode_id(c, s))
            for c in cards for s in range(k)]
    ids = [lv.eid for lv in todo]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(f"card {dup.split('#')[0]!r} appears twice in the suite",
                          fix="pass each card once and use k for repeats")
    done: dict[str, Trajectory] = {}
    writer: JsonlWriter | None = None
    if out is not None:
        done = _resume(Path(out), todo, policy, h)
        if retry_infra:
            done = {k: v for k, v in done.items() if v.outcome != "infra_error"}
        writer = JsonlWriter(out)
    st.skipped = len(done)
    queue = [lv for lv in todo if lv.eid not in done]
    results: dict[str, Trajectory] = dict(done)
    t_run = time.monotonic()
    bar = RunProgress(total=len(todo), done=list(done.values()), enabled=progress)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ceiling-env")
    live: list[_Live] = []
    closing: list[Future[Any]] = []

    def finish(lv: _Live, *, error: str | None = None, info: dict[str, Any] | None = None) -> None:
        tr = lv.traj
        assert tr is not None
        if error is not None:
            tr.outcome, tr.reward, tr.passed, tr.error = "infra_error", 0.0, False, error
        elif info is not None and "verdict" in info:
            v = info["verdict"]
            tr.outcome, tr.reward, tr.passed = v.outcome.value, float(v.reward), bool(v.passed)
            tr.verdict = v.model_dump(mode="json")
            tr.timings["verify_s"] = float(v.duration_s)
        else:
            tr.outcome, tr.error = "infra_error", "the environment ended without a verdict"
        tr.timings["total_s"] = time.monotonic() - lv.t0
        tr.timings.setdefault("policy_s", 0.0)
        tr.timings.setdefault("env_s", 0.0)
        results[lv.eid] = tr
        if writer is not None:
            writer.write(tr)
        if lv.env is not None:
            closing.append(pool.submit(lv.env.close))
        end = getattr(policy, "end_episode", None)
        if callable(end):
            end(lv.eid)
        st.episodes += 1
        bar.advance(tr)

    def start(lv: _Live) -> _Live:
        lv.t0 = time.monotonic()
        lv.traj = _new_traj(lv, policy, h, sp)
        lv.dialogue = h.start(lv.card)
        lv.env = env_factory(lv.card, backend=backend, reward_spec=rs, limits=limits)
        lv.env.reset(seed=lv.seed)
        return lv

    try:
        while queue or live:
            # 1. fill the live set (resets run in the pool)
            t = time.monotonic()
            starting: list[tuple[_Live, Future[_Live]]] = []
            while queue and len(live) + len(starting) < concurrency:
                lv = queue.pop(0)
                starting.append((lv, pool.submit(start, lv)))
            for lv, fut in starting:
                try:
                    fut.result()
                    live.append(lv)
                except Exception as e:  # noqa: BLE001 - sandbox trouble is infra, not the model
                    if lv.traj is None:
                        lv.traj = _new_traj(lv, policy, h, sp)
                    finish(lv, error=f"environment failed to start: {type(e).__name__}: {e}")
            st.env_s += time.monotonic() - t
            if not live:
                continue
            # 2. one policy batch for every live episode
            t = time.monotonic()
            reqs = []
            for lv in live:
                assert lv.dialogue is not None
                req = lv.dialogue.request()
                req.context.update(episode_id=lv.eid, seed=lv.seed)
                reqs.append(req)
            st.harness_s += time.monotonic() - t
            # one sampling seed per round, from the run seed (and the user's, if any)
            round_sp = dataclasses.replace(
                sp, seed=(((sp.seed or 0) * 1_000_003) ^ (seed * 7_919) + st.rounds) % 2**31)
            t = time.monotonic()
            try:
                gens = policy.generate(reqs, round_sp)
                if len(gens) != len(reqs):
                    raise RuntimeError(f"policy returned {len(gens)} generations for "
                                       f"{len(reqs)} requests")
            except PolicyError:
                raise
            except Exception as e:  # noqa: BLE001 - a policy crash fails this round's episodes
                msg = f"policy crashed: {type(e).__name__}: {e}"
                for lv in live:
                    finish(lv, error=msg)
                live = []
                continue
            dt = time.monotonic() - t
            st.policy_s += dt
            st.rounds += 1
            share = dt / len(live)
            # 3. parse replies (harness) and step the environments (pool)
            t = time.monotonic()
            stepping: list[tuple[_Live, Generation, Action | None, str | None]] = []
            still: list[_Live] = []
            for lv, g, req in zip(live, gens, reqs, strict=True):
                if g.error is not None:
                    _record(lv, g, req, None, None, "", share, 0.0, h, ended=True)
                    finish(lv, error=f"policy error: {g.error}")
                    continue
                action, perr = _parse(lv, g)
                stepping.append((lv, g, action, perr))
            st.harness_s += time.monotonic() - t
            t = time.monotonic()
            steps = [(item, pool.submit(_step, item[0].env, item[2])) for item in stepping]
            for (lv, g, action, perr), step_fut in steps:
                req = reqs[live.index(lv)]
                try:
                    obs, _rew, term, trunc, info, env_dt = step_fut.result()
                except Exception as e:  # noqa: BLE001 - the env broke: infra, not the model
                    _record(lv, g, req, action, perr, f"[error] {e}", share, 0.0, h)
                    finish(lv, error=f"environment step failed: {type(e).__name__}: {e}")
                    continue
                st.steps += 1
                _record(lv, g, req, action, perr, obs, share, env_dt, h, ended=bool(term))
                if term or trunc:
                    assert lv.traj is not None
                    lv.traj.terminated, lv.traj.truncated = bool(term), bool(trunc)
                    finish(lv, info=info)
                else:
                    still.append(lv)
            st.env_s += time.monotonic() - t
            live = still
    finally:
        for lv in live:
            if lv.env is not None:
                closing.append(pool.submit(lv.env.close))
        for f in closing:
            try:
                f.result()
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass
        pool.shutdown(wait=True)
        if writer is not None:
            writer.close()
        bar.close()
        st.wall_s += time.monotonic() - t_run
    return [results[lv.eid] for lv in todo if lv.eid in results]


def _parse(lv: _Live, g: Generation) -> tuple[Action | None, str | None]:
    assert lv.dialogue is not None
    try:
        return lv.dialogue.parse(g.text, finish_reason=g.finish_reason), None
    except ReplyError as e:
        return None, str(e)


def _step(env: Any, action: Action | None) -> tuple[Any, ...]:
    t = time.monotonic()
    res = env.step(action if action is not None else dict(UNPARSEABLE))
    return (*res, time.monotonic() - t)


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
        done[tr.episode_id] = tr
    return done
