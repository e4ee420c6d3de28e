"""The ``terminal_ops`` family: shell work on files, logs, archives, configs and git.

Importing this package registers its templates. Two groups:

- the **demo suite** (tag ``demo``): single-file, one-command tasks for tiny models
  (:data:`DEMO_OPS` holds their instruction and command shapes);
- the **multistep demo suite** (tag ``multistep``): 2-4 demo commands chained in one task
  (:data:`MULTISTEP_TEMPLATES`), for ``ceiling demo --suite multistep``;
- **multi-step templates** whose difficulty knob scales the oracle from a few steps
  (short) to dozens (long).

See ``docs/environments.md`` for each template's task, variants and limits.
"""

from . import (
    _aggregate,
    _archive,
    _cleanup,
    _config,
    _demo,
    _git,
    _multistep,
    _perms,
    _rotate,
    _script,
)
from ._demo import DEMO_OPS, DEMO_TEMPLATES
from ._multistep import MULTISTEP_TEMPLATES

__all__ = ["DEMO_OPS", "DEMO_TEMPLATES", "MULTISTEP_TEMPLATES"]

del _aggregate, _archive, _cleanup, _config, _demo, _git, _multistep, _perms, _rotate, _script
