"""Environment families: procedural generators of task cards, and the registry."""

from ._common import EXTS_TRAIN, WORDS_TRAIN
from ._mix import MixSpec, TaskMix, check_seed, distribution_report
from ._registry import (
    MAX_SEED,
    VARIANTS,
    Template,
    Variant,
    get_template,
    make,
    register,
    templates,
)

__all__ = [
    "EXTS_TRAIN",
    "MAX_SEED",
    "VARIANTS",
    "WORDS_TRAIN",
    "MixSpec",
    "TaskMix",
    "Template",
    "Variant",
    "check_seed",
    "distribution_report",
    "get_template",
    "make",
    "register",
    "templates"
]
