"""The trainer's weights as an inference engine loads them (LoRA merged), for engines that
hold their own copy (``vllm``, ``ct2``: ``EngineSpec.syncs_weights``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

def inference_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of every weight of ``model`` as a plain transformers model names it.

    For a peft LoRA model, the adapters are merged out of place: a LoRA layer's weight is
    ``base + get_delta_weight()`` of its active adapters (peft's own formula, ``B A *
    alpha / r``) in a new tensor, so the trainer's base weights stay bit for bit as they
    are (peft's ``merge_adapter``/``unmerge_adapter``, which TRL uses, adds and subtracts in
    place). Names lose peft's ``base_model.model.`` prefix and ``.base_layer``; adapter
    tensors themselves are skipped. Tensors are yielded one at a time (no copy of the whole
    model). Tied weights appear once, as ``named_parameters`` lists them.

    Under FSDP2 (``learners.distributed``) the parameters are gathered outside an optimiser
    step, so they are full tensors here; a sharded ``DTensor`` (a push from inside a step) is
    all-gathered with ``full_tensor()`` as TRL does, a collective every rank must reach.
    """
    lora_modules: dict[str, Any] = {}
    prefix = ""
    if hasattr(model, "peft_config"):  # a peft model
        prefix = getattr(model, "prefix", "lora_")
        for name, module in model.named_modules():
            if hasattr(module, "get_delta_weight") and hasattr(module, "lora_A"):
                lora_modules[name] = module
    with torch.no_grad():
        for name, param in model.named_parameters():
            if prefix and (prefix in name or "original_module" in name):
                continue
            tensor = param.detach()
            if hasattr(tensor, "full_tensor"):  # an FSDP2 shard
                tensor = tensor.full_tensor()
            if name.endswith(".base_layer.weight"):
                module = lora_modules.get(name[: -len(".base_layer.weight")])
                if module is not None:
                    merged = tensor.clone()
                    for adapter in module.active_adapters:
                        if adapter in module.lora_A and adapter not in module.merged_adapters:
                            merged += module.get_delta_weight(adapter).to(merged.dtype)
                    tensor = merged
            clean = name.removeprefix("base_model.model.").replace(".base_layer", "")
            clean = clean.replace("modules_to_save.default.", "")
            yield clean, tensor
