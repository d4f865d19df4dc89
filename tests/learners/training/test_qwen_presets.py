"""The Qwen presets and their memory arithmetic (docs/guide/scaling.md,
scripts/memory_arithmetic.py)."""

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from learners.training.presets import PRESETS

ROOT = Path(__file__).resolve().parents[3]


def _load_script():
    spec = importlib.util.spec_from_file_location(
        "memory_arithmetic", ROOT / "scripts" / "memory_arithmetic.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("memory_arithmetic", module)
    spec.loader.exec_module(module)
    return module


mem = _load_script()


@pytest.mark.parametrize("name", sorted(mem.QWEN))
def test_parameter_and_lora_counts_match_transformers_and_peft(name):
    """Two layers at the real widths (meta device: no memory), counted by peft itself."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Qwen2Config

    s = dataclasses.replace(mem.QWEN[name], layers=2)
    config = Qwen2Config(
        hidden_size=s.hidden,
        intermediate_size=s.intermediate,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        num_key_value_heads=s.kv_heads,
        vocab_size=s.vocab,
        tie_word_embeddings=s.tied,
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    assert sum(p.numel() for p in model.parameters()) == s.params()
    lora = LoraConfig(r=128, lora_alpha=256, target_modules="all-linear", task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lora)
    trainable = [p for p in peft_model.parameters() if p.requires_grad]
    assert sum(p.numel() for p in trainable) == s.lora_params(128)
    assert {p.dtype for p in trainable} == {torch.float32}  # hence 16 bytes per adapter param


def test_published_sizes():
    qwen3, qwen7 = mem.QWEN["Qwen/Qwen2.5-3B-Instruct"], mem.QWEN["Qwen/Qwen2.5-7B-Instruct"]
    assert qwen3.params() == 3_085_938_688 and qwen7.params() == 7_615_616_512
    assert qwen3.lora_params(128) == 239_468_544 and qwen7.lora_params(128) == 322_961_408


def test_the_qwen_presets_fit_an_80_gb_card_with_room_to_spare():
    for preset in ("paper", "paper-1gpu"):
        assert mem.estimate(preset).total < 0.75 * mem.CARD_GIB, preset


def test_paper_presets_are_what_the_docs_say():
    paper, one = PRESETS["paper"], PRESETS["paper-1gpu"]
    assert paper.model == "Qwen/Qwen2.5-7B-Instruct" and one.model == "Qwen/Qwen2.5-3B-Instruct"
    for cfg in (paper, one):
        assert cfg.learner.lora.r == 128 and cfg.learner.lr == 3e-6
        assert cfg.learner.gradient_checkpointing and cfg.device == "cuda"
    assert paper.rounds_per_step * 8 == 64  # per process, on 8 GPUs


def test_docs_hold_the_current_arithmetic():
    text = (ROOT / "docs" / "guide" / "scaling.md").read_text(encoding="utf-8")
    assert mem.report() in text, "rerun scripts/memory_arithmetic.py into docs/guide/scaling.md"


def test_the_accelerate_config_is_a_valid_multi_gpu_config():
    from accelerate.commands.config.config_args import load_config_from_file

    cfg = load_config_from_file(str(ROOT / "examples" / "accelerate" / "paper_8gpu.yaml"))
    assert cfg.distributed_type.value == "MULTI_GPU" and cfg.num_processes == 8
    assert cfg.mixed_precision == "no"  # the model is bf16 already; no autocast applies
