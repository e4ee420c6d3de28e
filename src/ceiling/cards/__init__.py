"""Task cards: the schema, the folder format and file trees."""

from ._environment import card_limits, image_steps, operator_max
from ._files import FileEntry, FileTree, read_tree, tree_hash, write_tree
from ._io import card_from_dict, load_card, save_card
from ._schema import (
    HORIZONS,
    TASK_TYPES,
    Acceptance,
    Budget,
    CardLimits,
    Environment,
    Fault,
    ImageStep,
    LintPolicy,
    Milestone,
    TaskCard,
    ToolSpec,
    horizon_for_steps,
)

__all__ = [
    "HORIZONS",
    "TASK_TYPES",
    "Acceptance",
    "Budget",
    "CardLimits",
    "Environment",
    "Fault",
    "FileEntry",
    "FileTree",
    "ImageStep",
    "LintPolicy",
    "Milestone",
    "TaskCard",
    "ToolSpec",
    "card_from_dict",
    "card_limits",
    "horizon_for_steps",
    "image_steps",
    "load_card",
    "operator_max",
    "read_tree",
    "save_card",
    "tree_hash",
    "write_tree"
]
