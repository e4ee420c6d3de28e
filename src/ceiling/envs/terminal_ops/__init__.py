"""The ``terminal_ops`` family: shell work on files, logs, archives, configs and git.

Importing this package registers its templates. Two groups:

- the **demo suite** (tag ``demo``): single-file, one-command tasks for tiny models
  (:data:`DEMO_OPS` holds their instruction and command shapes);
- **multi-step templates** whose difficulty knob scales the oracle from a few steps
  (short) to dozens (long).

See ``docs/environments.md`` for each template's task, variants and limits.
"""

from . import _aggregate, _archive, _cleanup, _config, _demo, _git, _perms, _rotate, _script
from ._demo import DEMO_OPS, DEMO_TEMPLATES

__all__ = ["DEMO_OPS", "DEMO_TEMPLATES"]

del _aggregate, _archive, _cleanup, _config, _demo, _git, _perms, _rotate, _script
