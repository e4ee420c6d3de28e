"""Family ``repo_refactor``: generated multi-module Python repositories to refactor or fix.

Importing this package registers its templates (see ``ceiling.envs.templates``).
:func:`oracle_script` turns a set of files into the family's solution script (synthesized
repo cards use it too).
"""

from . import (  # noqa: F401
    _t_bugfix,
    _t_dedup,
    _t_extract,
    _t_perf,
    _t_rename,
    _t_signature,
    _t_split,
    _t_validation,
)
from ._kit import oracle_script

__all__ = ["oracle_script"]
