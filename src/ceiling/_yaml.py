"""Read a YAML file and report the first validation error, the same way for every file.

A floor module for the three readers of user YAML (task cards, task mixes, training
configs). :func:`load_yaml` parses a file and turns a syntax error into one
:class:`~ceiling._errors.CeilingError` naming ``file:line``; :func:`first_error` picks the
first pydantic error and says where it is and how to fix it (a "did you mean" for an
unknown key, looked up in the model the key belongs to, however deep).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._errors import CeilingError, ConfigError, nearest


def load_yaml(path: str | os.PathLike[str], *, error: type[CeilingError] = ConfigError,
              missing_fix: str = "check the path", what: str = "no such file") -> Any:
    """The parsed content of the YAML file at ``path``. A missing file or a syntax error
    raises ``error`` with ``where`` = ``path`` (``path:LINE`` for a syntax error)."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise error(what, where=str(p), fix=missing_fix)
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise error(f"not valid YAML ({getattr(e, 'problem', None) or str(e).splitlines()[0]})",
                    where=f"{p}{line}", fix="check indentation and quoting on that line") from None


def fields_at(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The field names of the pydantic model that holds the key at ``loc`` (nested models,
    lists and optionals are followed); ``[]`` when it cannot be told."""
    from pydantic import BaseModel

    cur = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        f = cur.model_fields.get(str(part)) if isinstance(cur, type) and \
            issubclass(cur, BaseModel) else None
        if f is None:
            return []
        ann = f.annotation
        nxt = next((a for a in (ann, *getattr(ann, "__args__", ()))
                    if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if nxt is None:
            return []
        cur = nxt
    return list(cur.model_fields) if isinstance(cur, type) and issubclass(cur, BaseModel) else []


def first_error(exc: Any, model: Any) -> tuple[str, str, str | None, dict[str, Any]]:
    """``(kind, dotted location, did-you-mean hint or None, the raw error)`` of the first
    error of a pydantic ``ValidationError`` raised validating ``model``. ``kind`` is
    pydantic's type (``missing``, ``extra_forbidden``, ...); the location is
    ``"(top level)"`` when empty."""
    err = dict(exc.errors()[0])
    loc = tuple(err.get("loc", ()))
    dotted = ".".join(str(x) for x in loc) or "(top level)"
    kind = str(err.get("type", ""))
    hint = nearest(str(loc[-1]), fields_at(model, loc)) if kind == "extra_forbidden" and loc \
        else None
    return kind, dotted, hint, err
