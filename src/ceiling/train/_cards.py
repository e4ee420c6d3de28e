"""Which (template, difficulty, variant) arms a stage trains on.

A stage names its cards by explicit ``templates``, a ``family``, ``tags`` (all must match)
and/or a task-mix file (``mix``: the (template, difficulty) options of
``ceiling.envs.TaskMix`` with non-zero weight; the band sampler then draws among them
by pass rate, not by the mix weights). The union is filtered by ``difficulties``; an empty
result is a ConfigError naming the stage, never a silent no-op.
"""

from __future__ import annotations

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
    if not arms:
        raise ConfigError(f"stage {stage.name!r} has an empty task mix", where="stages",
                          fix="give it templates, a family, tags or a mix that match at "
                              "least one template (and difficulty)")
    return arms
