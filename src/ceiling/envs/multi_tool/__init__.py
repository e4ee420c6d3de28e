"""multi_tool: tasks that chain a SQLite database (``sql``), a document collection
(``search``) and a small HTTP service on the sandbox's loopback (``run curl ...``).

Importing this package registers its templates.
"""

from . import fx, merge, paging, refund, restock, warranty  # noqa: F401

__all__: list[str] = []
