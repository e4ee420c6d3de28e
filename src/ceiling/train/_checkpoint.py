"""Checkpoints and the post-training "unit".

A checkpoint is a folder ``checkpoints/step-NNNNNN/``:

- ``adapter/``: the LoRA adapter (``PeftModel.from_pretrained(base, PATH/adapter)`` loads it);
- ``trainer.pt``: optimizer, sampler, RNG states and the loop position (exact resume);
- ``meta.json``: the base (path, SHA-256 of its weights), the config, the unit so far
  (rollouts, distinct cards, env steps, generated tokens, trainer FLOPs estimate, wall time)
  and the step's metrics.

Written to a temp folder then renamed, so a killed run never leaves a half-written
checkpoint; ``latest.json`` (replaced atomically) points at the newest one.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._errors import ConfigError

FORMAT = 1


@dataclass
class Unit:
    """What post-training has consumed so far. ``trainer_flops`` is an estimate:
    6 · params · tokens through forward+backward plus 2 · params · tokens through forward
    only (sampling, reference); ``params`` counts the base (the adapter adds little)."""

    rollouts: int = 0
    distinct_cards: int = 0
    env_steps: int = 0
    generated_tokens: int = 0
    prompt_tokens: int = 0
    trained_tokens: int = 0
    trainer_flops: float = 0.0
    wall_s: float = 0.0
    optimizer_steps: int = 0


@dataclass
class TrainerState:
    """Everything besides the adapter and optimizer tensors needed to resume exactly."""

    global_step: int = 0
    stage_index: int = 0
    stage_step: int = 0
    unit: Unit = field(default_factory=Unit)
    card_ids: list[str] = field(default_factory=list)


def write_checkpoint(run_dir: Path, *, model: Any, optimizer_state: dict[str, Any],
                     sampler_state: dict[str, Any], state: TrainerState, meta: dict[str, Any],
                     keep: int = 3) -> Path:
    import random

    import torch

    ckdir = run_dir / "checkpoints"
    ckdir.mkdir(parents=True, exist_ok=True)
    name = f"step-{state.global_step:06d}"
    final = ckdir / name
    tmp = ckdir / f".{name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    model.save_pretrained(str(tmp / "adapter"))
    torch.save({"format": FORMAT, "optimizer": optimizer_state, "sampler": sampler_state,
                "state": asdict(state), "rng_python": random.getstate(),
                "rng_torch": torch.get_rng_state()}, tmp / "trainer.pt")
    full_meta = {"format": FORMAT, "step": state.global_step, "created": time.time(),
                 "unit": asdict(state.unit), **meta}
    (tmp / "meta.json").write_text(json.dumps(full_meta, indent=1, sort_keys=True) + "\n")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    _atomic_write(ckdir / "latest.json", json.dumps({"checkpoint": name}) + "\n")
    olds = sorted(p for p in ckdir.iterdir() if p.is_dir() and p.name.startswith("step-"))
    for p in olds[:-keep]:
        shutil.rmtree(p, ignore_errors=True)
    return final


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def latest_checkpoint(run_dir: Path) -> Path | None:
    ptr = run_dir / "checkpoints" / "latest.json"
    if not ptr.is_file():
        return None
    p = run_dir / "checkpoints" / json.loads(ptr.read_text())["checkpoint"]
    return p if p.is_dir() else None


def read_meta(ckpt: Path) -> dict[str, Any]:
    ckpt = Path(ckpt)
    f = ckpt / "meta.json"
    if not f.is_file():
        raise ConfigError(f"{str(ckpt)!r} is not a ceiling checkpoint (no meta.json)",
                          where=str(ckpt), fix="point at a checkpoints/step-NNNNNN folder")
    return dict(json.loads(f.read_text()))


def load_trainer_state(ckpt: Path) -> dict[str, Any]:
    import torch

    blob = torch.load(ckpt / "trainer.pt", map_location="cpu", weights_only=False)
    return dict(blob)


def restore_rng(blob: dict[str, Any]) -> None:
    import random

    import torch

    st = blob["rng_python"]
    random.setstate((st[0], tuple(st[1]), st[2]))
    torch.set_rng_state(blob["rng_torch"])


def state_from_blob(blob: dict[str, Any]) -> TrainerState:
    s = dict(blob["state"])
    s["unit"] = Unit(**s["unit"])
    return TrainerState(**s)


def check_same_base(ckpt_meta: dict[str, Any], base_sha: str, where: str) -> None:
    """Refuse a checkpoint trained on another base, naming both hashes."""
    theirs = ckpt_meta.get("base_sha256")
    if theirs != base_sha:
        raise ConfigError(f"checkpoint was trained on base {theirs} but this base is {base_sha}",
                          where=where, fix="resume with the base the checkpoint was trained "
                                           "on, or start a new run in another folder")


def verify_base(ckpt: Path, base_dir: Path) -> dict[str, Any]:
    """Compare a checkpoint's recorded base hash with ``base_dir``'s weights."""
    from ..basemodel import weights_sha256

    ckpt = Path(ckpt)
    if (ckpt / "checkpoints").is_dir():
        latest = latest_checkpoint(ckpt)
        if latest is None:
            raise ConfigError(f"no checkpoint in {str(ckpt)!r}", where=str(ckpt),
                              fix="point at a checkpoints/step-NNNNNN folder")
        ckpt = latest
    meta = read_meta(ckpt)
    actual = weights_sha256(base_dir)
    return {"checkpoint": str(ckpt), "base": str(base_dir), "recorded": meta.get("base_sha256"),
            "actual": actual, "match": meta.get("base_sha256") == actual}
