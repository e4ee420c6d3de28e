"""``ceiling eval`` as a function: resolve a suite, roll the policy out, summarise, store.

``record_run`` is the part that needs no rollout (the trainer's demo and tests call it with
trajectories they already have); ``run_eval`` adds the suite and the rollout runner.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from .._errors import ConfigError
from ..cards import TaskCard
from ..rollout import Trajectory
from ..verify import Verdict
from ._metrics import summarize
from ._store import RunRecord, Store, comparability_key
from ._suite import resolve_suite


def verifier_version(trajectories: Sequence[Trajectory]) -> str:
    """The verifier version the episodes were judged with (several: joined with '+';
    none recorded, e.g. only infra errors: the current Verdict default)."""
    seen = sorted({str(t.verdict["verifier_version"]) for t in trajectories
                   if t.verdict.get("verifier_version") is not None})
    return "+".join(seen) if seen else str(Verdict.model_fields["verifier_version"].default)


def record_run(trajectories: Sequence[Trajectory], *, policy: str, suite: str,
               card_ids: Sequence[str], harness_fingerprint: str, sampling: dict[str, Any],
               trajectories_path: str | Path, name: str | None = None,
               store: Store | None = None, k: int | None = None, seed: int = 0,
               run_id: str | None = None, resamples: int = 1000,
               extra: dict[str, Any] | None = None) -> RunRecord:
    """Summarise ``trajectories`` and store them as a run. ``card_ids`` are the cards'
    content ids (``TaskCard.content_id()``): they, the harness fingerprint, ``sampling``, the
    verifier version and the package version form the comparability key."""
    store = store or Store()
    key, parts = comparability_key(card_ids, harness_fingerprint, sampling,
                                   verifier_version(trajectories), __version__)
    summary = summarize(trajectories, k=k, seed=seed, resamples=resamples)
    rid = run_id or uuid.uuid4().hex[:12]
    summary = {"run_id": rid, "name": name, "key": key, "policy": policy, "suite": suite,
               **summary, **(extra or {})}
    return store.add_run(policy=policy, suite=suite, key=key, key_parts=parts, summary=summary,
                         trajectories=list(trajectories), trajectories_path=trajectories_path,
                         name=name, run_id=rid)


def _run_dir(store: Store, rid: str, name: str | None, manifest: dict[str, Any]) -> Path:
    """Where a run's trajectories go. A named run uses ``runs/name-<name>/``, so rerunning
    an interrupted ``eval --name X`` resumes it (the runner skips finished episodes) — but
    only with the same settings (``manifest``); otherwise it is an error."""
    import json
    import re

    if name is None:
        d = store.path.parent / "runs" / rid
    else:
        d = store.path.parent / "runs" / ("name-" + re.sub(r"[^A-Za-z0-9_.-]", "_", name))
    d.mkdir(parents=True, exist_ok=True)
    mpath = d / "run.json"
    text = json.dumps(manifest, sort_keys=True, default=str)
    if mpath.is_file() and mpath.read_text() != text and (d / "trajectories.jsonl").exists():
        raise ConfigError(f"an interrupted run named {name!r} exists with other settings",
                          where=str(d), fix="rerun it with the same options to resume, "
                          "delete that folder, or choose another --name")
    mpath.write_text(text)
    return d


def run_eval(policy: str, suite: str, *, n: int | None = None, k: int = 1,
             name: str | None = None, seed: int = 0, card_seed: int = 0,
             backend: str = "namespace", workers: int = 4, harness_format: str | None = None,
             max_new_tokens: int | None = None, temperature: float | None = None,
             top_p: float | None = None,
             store: Store | None = None, cards: list[TaskCard] | None = None,
             executor: str = "local", ray_address: str | None = None) -> RunRecord:
    """Evaluate ``policy`` (a spec string) on ``suite`` with ``k`` samples per card and store
    the run. ``harness_format``: line | json | bash (None: the policy's default,
    :func:`ceiling.harness.default_format`); ``temperature`` 0 is greedy. The harness
    fingerprint and the sampling settings enter the comparability key. Trajectories go to
    ``$CEILING_HOME/runs/<run id>/trajectories.jsonl`` (``runs/name-<name>/`` for a named
    run, which resumes if it was interrupted). ``executor``/``ray_address``: where the
    environment steps run (``local`` threads or ``ray`` workers; same results)."""
    if k < 1:
        raise ConfigError(f"-k {k} asks for no sample", where="-k", fix="use -k 1 or more")
    store = store or Store()
    if name is not None and store.name_taken(name):
        raise ConfigError(f"a run named {name!r} already exists", where="--name",
                          fix="choose another --name, or omit it to get a fresh id")
    cards = cards if cards is not None else resolve_suite(suite, n, card_seed=card_seed)
    from ..harness import FORMATS, HarnessConfig, default_format
    from ..policies import load_policy, policy_tokenizer, sampling_params
    from ..rollout import run_episodes

    pol = load_policy(policy)
    tok = policy_tokenizer(pol)
    if harness_format is None:
        harness_format = default_format(tok)
    if harness_format not in FORMATS:
        raise ConfigError(f"unknown harness format {harness_format!r}", where="--harness",
                          fix="use " + " | ".join(FORMATS))
    harness = HarnessConfig.model_validate({"format": harness_format})
    sampling = sampling_params(temperature=temperature, top_p=top_p,
                               max_new_tokens=max_new_tokens if max_new_tokens is not None
                               else harness.max_reply_tokens)
    rid = uuid.uuid4().hex[:12]
    manifest = {"policy": policy, "suite": suite, "k": k, "seed": seed,
                "cards": sorted(c.content_id() for c in cards),
                "harness": harness.fingerprint(tok), "sampling": dataclasses.asdict(sampling)}
    out = _run_dir(store, rid, name, manifest) / "trajectories.jsonl"
    trajs = run_episodes(cards, pol, harness, k=k, sampling=sampling, backend=backend, out=out,
                         workers=workers, seed=seed, executor=executor,
                         ray_address=ray_address)
    trajs = list(trajs)
    if not out.is_file():  # the runner keeps records in memory only when out is None
        out.write_text("".join(t.to_json() + "\n" for t in trajs), encoding="utf-8")
    # the fingerprint the episodes recorded (covers the chat template); else our own
    fps = sorted({t.harness_fingerprint for t in trajs if t.harness_fingerprint})
    fingerprint = "+".join(fps) if fps else harness.fingerprint(tok)
    recorded = next((t.sampling for t in trajs if t.sampling), None)
    samp = dict(recorded) if recorded else dataclasses.asdict(sampling)
    samp["stop"] = list(samp.get("stop") or ())
    return record_run(trajs, policy=policy, suite=suite,
                      card_ids=[c.content_id() for c in cards],
                      harness_fingerprint=fingerprint, sampling=samp,
                      trajectories_path=out, name=name, store=store, k=k, seed=seed,
                      run_id=rid)


__all__ = ["record_run", "run_eval", "verifier_version"]
