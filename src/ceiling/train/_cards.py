"""Which (template, difficulty, variant) arms a stage trains on.

A stage names its cards by explicit ``templates``, a ``family``, ``tags`` (all must match)
and/or a task-mix file (``mix``: the (template, difficulty) options of
``ceiling.envs.TaskMix`` with non-zero weight; the band sampler then draws among them
by pass rate, not by the mix weights), and/or ``cards``: a folder of card folders (what
``ceiling synth`` or ``ceiling import`` writes) or one card folder, where every card is an
arm of its own (fixed cards have no seeds: the sampler's per-card pass rate is the
difficulty filter). Cards of the ``heldout`` split are never trained on. The union is
filtered by ``difficulties`` (and folder cards by ``variants``: a card's variant is
``train`` unless it is infeasible); an empty result is a ConfigError naming the stage,
never a silent no-op.
"""

from __future__ import annotations

from pathlib import Path

from .._errors import ConfigError
from ._config import StageConfig
from ._sampler import Arm


def stage_templates(stage: StageConfig) -> list[str]:
    from ..envs import get_template, templates

    ids: list[str] = []
    for tid in stage.templates:
        ids.append(get_template(tid).template_id())
    if stage.family or stage.tags:
        for t in templates(stage.family):
            if all(tag in t.tags for tag in stage.tags):
                ids.append(t.template_id())
    return sorted(set(ids))


def _mix_options(stage: StageConfig) -> list[tuple[str, int]]:
    if not stage.mix:
        return []
    from ..envs import TaskMix

    mix = TaskMix.from_yaml(stage.mix)
    joint = mix.joint()
    return sorted({opt for key, opts in mix.options.items() if joint.get(key, 0.0) > 0
                   for opt in opts})


def _card_dirs(stage: StageConfig) -> list[Path]:
    root = Path(str(stage.cards)).expanduser()
    where = f"stages[{stage.name}].cards"
    if not root.is_dir():
        raise ConfigError(f"stage {stage.name!r}: card folder {str(root)!r} does not exist",
                          where=where, fix="give a card folder or a folder of card folders "
                          "(e.g. the --out of ceiling synth or ceiling import)")
    if (root / "task.yaml").is_file():
        return [root]
    dirs = sorted(p for p in root.iterdir() if (p / "task.yaml").is_file())
    if not dirs:
        raise ConfigError(f"stage {stage.name!r}: {str(root)!r} holds no card folder "
                          "(no */task.yaml)", where=where,
                          fix="point at the folder whose sub-folders hold task.yaml")
    return dirs


def folder_arms(stage: StageConfig) -> list[Arm]:
    """One arm per card of ``stage.cards`` (train split only; filtered by difficulties and
    variants; the first folder of a duplicated card id wins)."""
    from .._errors import CardError
    from .._yaml import load_yaml
    from ..cards import card_from_dict

    arms: dict[str, Arm] = {}
    for d in _card_dirs(stage):
        # the fields only (task.yaml); the sampler loads a card's files when it draws it.
        # A malformed card raises CardError naming its file and field.
        raw = load_yaml(d / "task.yaml", error=CardError)
        if isinstance(raw, dict):
            raw.pop("base_layers", None)
        card = card_from_dict(raw, where=str(d / "task.yaml"))
        variant = "train" if card.feasible else "infeasible"
        if card.split == "heldout" or variant not in stage.variants:
            continue
        if stage.difficulties is not None and card.difficulty not in stage.difficulties:
            continue
        arms.setdefault(card.id, Arm(card.id, card.difficulty, variant, path=str(d.resolve())))
    return list(arms.values())


def stage_arms(stage: StageConfig) -> list[Arm]:
    """Every (template, difficulty, variant) of the stage. Raises ConfigError if empty."""
    from ..envs import get_template

    arms: list[Arm] = []
    for tid in stage_templates(stage):
        cls = get_template(tid)
        diffs = [d for d in cls.difficulties
                 if stage.difficulties is None or d in stage.difficulties]
        arms += [Arm(tid, d, v) for d in diffs for v in stage.variants]
    have = {(a.template, a.difficulty) for a in arms}
    for tid, d in _mix_options(stage):
        if (tid, d) not in have and (stage.difficulties is None or d in stage.difficulties):
            arms += [Arm(tid, d, v) for v in stage.variants]
    if stage.cards:
        arms += folder_arms(stage)
    if not arms:
        raise ConfigError(f"stage {stage.name!r} has an empty task mix", where="stages",
                          fix="give it templates, a family, tags, a mix or a card folder "
                              "that match at least one template or train-split card (and "
                              "difficulty)")
    return arms
