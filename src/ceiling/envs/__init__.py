"""Environment families: procedural generators of task cards, and the registry."""

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

__all__ = ["MAX_SEED", "VARIANTS", "Template", "Variant", "get_template", "make", "register",
           "templates"]
