"""Importers: other benchmarks' task folders as ceiling cards.

``import_harbor(path, out)`` converts Harbor tasks (Terminal-Bench 2.x and the other Harbor
datasets) one card per task, building each task's image once (root; the package
registries) and refusing, with a counted reason, whatever it cannot carry over. See
docs/import.md and :mod:`ceiling.importers._harbor`.
"""

from ._harbor import (
    IGNORED,
    SUPPORTED,
    ImportReport,
    Refused,
    TaskResult,
    build_card,
    find_tasks,
    import_harbor,
    import_task,
)

__all__ = ["IGNORED", "SUPPORTED", "ImportReport", "Refused", "TaskResult", "build_card",
           "find_tasks", "import_harbor", "import_task"]
