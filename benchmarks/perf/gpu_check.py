"""GPU check: rollout speed per engine, update time and memory, one TRR++ iteration.

Builds Qwen2.5-1.5B- and 7B-shaped causal LMs from their published configurations with random
weights (no download, no network), in bf16 on CUDA, and measures for each shape:

1. **Rollout tokens/s per engine** at batch ``--batch`` (64), through the engine classes the
   training loop uses (``learners.engines``, ``--rollout.engine``): ``hf`` (batched
   ``model.generate``, the default), ``hf-cb`` (transformers' continuous batching) and
   ``vllm`` when it is installed (the model is saved with a byte-level tokenizer and loaded by
   ``vllm.LLM``). No token ends a row, so every row makes exactly ``--tokens`` tokens; the
   figure includes each engine's log-probs and decoding. An engine that fails records its
   error instead of a figure.
2. **One update step**, full fine-tuning vs LoRA (peft, r = ``--lora-r``, 128 as in the paper)
   with gradient checkpointing, AdamW: seconds and peak CUDA memory (GiB) for ``--micro``
   sequences of ``--seq`` tokens. A configuration that runs out of memory records ``"oom"``.
3. **One whole TRR++ iteration** (``learners.training.loop``: ``--rounds`` SAGE rounds of rollout,
   verification and update) on the first shape, from a saved copy of the model, measured right
   after that shape (before the larger ones). With random weights the rewards are mostly zero,
   so this times the loop's machinery, not learning.

The JSON is rewritten after every measured part (``"complete": false`` until the end), so a run
stopped by a time limit still leaves the figures it had.

One command, no network, about 5 minutes on one H200 (307 s on 2026-12-04; figures in
``results/gpu_check.json``, docs/guide/scaling.md)::

    python -m benchmarks.perf.gpu_check                     # CUDA, writes results/gpu_check.json

A CPU-sized variant (a tiny shape, a few tokens) runs in the tests::

    python -m benchmarks.perf.gpu_check --shapes tiny --device cpu --dtype float32 --engines hf \\
        --batch 2 --prompt 8 --tokens 4 --seq 32 --micro 2 --lora-r 4 --rounds 1 --out /tmp/g.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import platform
import signal
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

RESULTS = Path(__file__).parent / "results"

SHAPES: dict[str, dict] = {
    # Qwen2.5-1.5B-Instruct and Qwen2.5-7B-Instruct config.json (architecture fields only)
    "qwen2.5-1.5b": dict(
        vocab_size=151936,
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
    "qwen2.5-7b": dict(
        vocab_size=152064,
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    ),
    # CPU-sized stand-in for tests
    "tiny": dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
}
"""Architecture fields of each shape (``transformers.Qwen2Config`` keyword arguments)."""

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def build(shape: str, device: str, dtype: torch.dtype, seed: int = 0):
    """A randomly initialised Qwen2-architecture model of ``shape`` on ``device``.

    Raises:
        KeyError: for an unknown shape.
    """
    from transformers import AutoModelForCausalLM, Qwen2Config

    cfg = Qwen2Config(**SHAPES[shape], pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _peak_gib(device: str) -> float | None:
    if device.startswith("cuda"):
        return round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return None


def _reset_peak(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _error(exc: BaseException) -> str:
    if isinstance(exc, torch.OutOfMemoryError):
        return "oom"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def _versions() -> dict:
    """Versions of the packages the figures depend on (``None``: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    names = ("torch", "transformers", "peft", "accelerate", "tokenizers", "vllm")
    found: dict = {"python": platform.python_version()}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    if torch.cuda.is_available():
        found["cuda"] = torch.version.cuda
    return found


@contextlib.contextmanager
def _deadline(seconds: float):
    """Raise :class:`TimeoutError` in the main thread after ``seconds`` (0: no limit).

    An engine that hangs or crawls (a stuck generation thread) then records an error instead
    of holding the rest of the check. POSIX main thread only; elsewhere no limit.
    """
    usable = seconds > 0 and hasattr(signal, "setitimer")
    usable = usable and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"ran past the {seconds:g} s limit (--engine-timeout)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class BenchHost:
    """The :class:`learners.engines.EngineHost` of a random-weight model: no EOS token.

    With ``eos_ids`` empty no engine ends a row early, so every row makes its whole budget.
    ``tokenizer`` is the byte-level one of ``learners.policy.tiny`` (decoding only; ids past its
    vocabulary decode to replacement characters), ``path`` a folder vLLM can load.
    """

    model: torch.nn.Module
    tokenizer: Any
    path: str
    device: torch.device
    dtype: torch.dtype
    eos_ids: set = field(default_factory=set)
    generator: torch.Generator = field(default_factory=lambda: torch.Generator().manual_seed(0))
    tokens_generated: int = 0


def rollout(engine: str, model, batch: int, prompt: int, tokens: int, device: str) -> dict:
    """Tokens/s of one rollout engine (``learners.engines``) as training runs it.

    The engine class the training loop uses (``--rollout.engine``) generates ``tokens`` new
    tokens for each of ``batch`` random prompts of ``prompt`` tokens (sampling at T = 1,
    no EOS), after a 2-token warm-up call; the figure includes what the engine does around
    the model (log-probs, decoding). ``vllm`` loads a saved copy of ``model``.

    Raises:
        ImportError: for ``vllm`` without vLLM (recorded as the engine's error).
    """
    from transformers import AutoTokenizer

    from learners.engines import RolloutConfig, make_engine, require_engine
    from learners.policy import SamplingConfig
    from learners.policy.tiny import build_tiny_model

    require_engine(engine)
    with tempfile.TemporaryDirectory() as tmp:
        build_tiny_model(tmp)  # byte-level tokenizer files; the weights are replaced below
        if engine == "vllm":
            model.save_pretrained(tmp)
        host = BenchHost(
            model, AutoTokenizer.from_pretrained(tmp), tmp, torch.device(device), model.dtype
        )
        eng = make_engine(host, RolloutConfig(engine=engine))
        try:
            g = torch.Generator().manual_seed(0)
            prompts = torch.randint(3, model.config.vocab_size, (batch, prompt), generator=g)
            prompts = prompts.tolist()
            # hf: transformers' min-length processor holds back the model config's EOS id
            # (hf-cb and vllm are told there is none)
            sampling = SamplingConfig(
                max_new_tokens=tokens, batch_size=batch, min_new_tokens=tokens * (engine == "hf")
            )
            warm = [p[:8] for p in prompts[:8]]
            warm_sampling = dataclasses.replace(sampling, min_new_tokens=2 * (engine == "hf"))
            eng.generate(warm, warm_sampling, [2] * len(warm), [()] * len(warm))
            _sync(device)
            t0 = time.perf_counter()
            out = eng.generate(prompts, sampling, [tokens] * batch, [()] * batch)
            _sync(device)
            seconds = time.perf_counter() - t0
        finally:
            eng.close()
    made = sum(len(c.completion_ids) for c in out)
    return {"tokens": made, "seconds": round(seconds, 3), "tokens_per_s": round(made / seconds, 1)}


ENGINES = ("hf", "hf-cb", "vllm")
"""Engines measured by default (``learners.engines.ENGINES``)."""


def update_step(model, micro: int, seq: int, device: str, lora_r: int) -> dict:
    """Seconds and peak memory of one AdamW step (gradient checkpointing), full or LoRA."""
    target = model
    if lora_r > 0:
        from peft import LoraConfig, get_peft_model

        target = get_peft_model(
            model, LoraConfig(r=lora_r, lora_alpha=2 * lora_r, target_modules=LORA_TARGETS)
        )
    target.gradient_checkpointing_enable()
    target.config.use_cache = False
    target.train()
    params = [p for p in target.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-6)
    ids = torch.randint(3, model.config.vocab_size, (micro, seq), device=device)
    _reset_peak(device)
    _sync(device)
    t0 = time.perf_counter()
    out = target(input_ids=ids, labels=ids)
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    _sync(device)
    seconds = time.perf_counter() - t0
    result = {
        "seconds": round(seconds, 3),
        "peak_gib": _peak_gib(device),
        "trainable_params": sum(p.numel() for p in params),
    }
    del opt, out
    if lora_r > 0:
        target.unload()  # back to the plain model for the next configuration
    model.gradient_checkpointing_disable()
    model.config.use_cache = True
    model.eval()
    return result


def trr_iteration(shape: str, device: str, dtype: str, rounds: int, tokens: int) -> dict:
    """One ``learners.training.loop`` step (SAGE rounds + TRR++ update) on a saved ``shape``
    model.

    With random weights every reward is equal, so every advantage is 0 and the learner would
    skip the whole buffer (``PolicyGradientLearner.skip_zero_advantage``): the update would
    cost nothing. The learner is made to train every sequence instead (same loss, all-zero
    advantages), as a step whose rewards differ would, so ``time/update_s`` is a real
    forward/backward over the step's buffer.
    """
    from unittest import mock

    from learners.algorithms.pg import PGConfig, PolicyGradientLearner
    from learners.policy.tiny import build_tiny_model
    from learners.reports.plots import read_metrics
    from learners.training.config import TrainConfig
    from learners.training.loop import train
    from sage_env import EnvConfig

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        build_tiny_model(model_dir)  # byte-level tokenizer; weights replaced below
        m = build(shape, "cpu" if device == "cpu" else device, getattr(torch, dtype))
        m.save_pretrained(model_dir)
        del m
        _reset_peak(device)
        cfg = TrainConfig(
            model=str(model_dir),
            out=str(Path(tmp) / "run"),
            steps=1,
            rounds_per_step=rounds,
            device=device,
            dtype=dtype,
            max_new_tokens=tokens,
            val_every=0,
            env=EnvConfig(solver_samples=2),
            learner=PGConfig(lr=1e-6, micro_batch_size=8, gradient_checkpointing=True),
        )
        init = PolicyGradientLearner.__init__

        def train_every_sequence(self, *args, **kwargs) -> None:
            init(self, *args, **kwargs)
            self.skip_zero_advantage = False

        t0 = time.perf_counter()
        with mock.patch.object(PolicyGradientLearner, "__init__", train_every_sequence):
            train(cfg, progress=False)
        seconds = time.perf_counter() - t0
        row = read_metrics(Path(cfg.out) / "metrics.jsonl")[-1]
    keys = (
        "time/generate_s",
        "time/update_s",
        "time/step_s",
        "rollout/tokens",
        "learner/skipped_share",
        "learner/num_sequences",
    )
    return {
        "seconds_with_load": round(seconds, 2),
        **{k: round(float(row[k]), 3) for k in keys if k in row},
        "peak_gib": _peak_gib(device),
    }


def main(argv: list[str] | None = None) -> dict:
    """Run every check; write and return the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="qwen2.5-1.5b,qwen2.5-7b", help="comma-separated SHAPES")
    p.add_argument("--device", default="cuda", help="torch device")
    p.add_argument("--dtype", default="bfloat16", help="torch dtype name")
    p.add_argument("--engines", default="hf,hf-cb,vllm", help="comma-separated ENGINES")
    p.add_argument("--batch", type=int, default=64, help="rollout batch (rows)")
    p.add_argument("--prompt", type=int, default=256, help="prompt tokens per row")
    p.add_argument("--tokens", type=int, default=256, help="new tokens per row")
    p.add_argument("--micro", type=int, default=8, help="sequences in the update step")
    p.add_argument("--seq", type=int, default=1024, help="tokens per sequence in the update")
    p.add_argument("--lora-r", type=int, default=128, help="LoRA rank of the LoRA update arm")
    p.add_argument("--rounds", type=int, default=16, help="SAGE rounds of the TRR++ iteration")
    p.add_argument(
        "--engine-timeout",
        type=float,
        default=180,
        help="seconds one engine's rollout may take before it records a timeout (0: no limit)",
    )
    p.add_argument("--out", default=str(RESULTS / "gpu_check.json"), help="JSON output path")
    args = p.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device; use --device cpu with --shapes tiny")
    dtype = getattr(torch, args.dtype)
    result: dict = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "host": platform.node(),
        "versions": _versions(),
        "settings": vars(args),
        "complete": False,
        "shapes": {},
    }
    t_start = time.perf_counter()
    out_path = Path(args.out)

    def save() -> None:  # after every part: a run cut short keeps what it measured
        result["seconds"] = round(time.perf_counter() - t_start, 1)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(result, indent=2) + "\n")

    def timed(entry: dict) -> dict:
        entry["at_s"] = round(time.perf_counter() - t_start, 1)  # since the start, when done
        return entry

    shapes = [s for s in args.shapes.split(",") if s]
    save()
    for i, shape in enumerate(shapes):
        entry: dict = {"rollout": {}, "update": {}}
        result["shapes"][shape] = entry
        try:
            model = build(shape, args.device, dtype)
        except Exception as exc:  # noqa: BLE001  (e.g. a shape that does not fit)
            entry["error"] = _error(exc)
            traceback.print_exc()
            save()
            continue
        model.eval()
        entry["params"] = sum(p.numel() for p in model.parameters())
        for engine in [e for e in args.engines.split(",") if e]:
            try:
                with torch.no_grad(), _deadline(args.engine_timeout):
                    entry["rollout"][engine] = rollout(
                        engine, model, args.batch, args.prompt, args.tokens, args.device
                    )
            except Exception as exc:  # noqa: BLE001  (an engine's failure is a figure)
                entry["rollout"][engine] = {"error": _error(exc)}
                if not isinstance(exc, ImportError):
                    traceback.print_exc()
            timed(entry["rollout"][engine])
            _reset_peak(args.device)
            print(shape, engine, json.dumps(entry["rollout"][engine]), flush=True)
            save()
        for name, r in (("full", 0), (f"lora_r{args.lora_r}", args.lora_r)):
            try:
                entry["update"][name] = update_step(model, args.micro, args.seq, args.device, r)
            except Exception as exc:  # noqa: BLE001
                entry["update"][name] = {"error": _error(exc)}
                traceback.print_exc()
            timed(entry["update"][name])
            _reset_peak(args.device)
            print(shape, name, json.dumps(entry["update"][name]), flush=True)
            save()
        del model
        _reset_peak(args.device)
        print(shape, json.dumps(entry), flush=True)
        if i == 0:  # the loop on the first (smallest) shape, before the larger ones
            try:
                result["trr_iteration"] = {
                    "shape": shape,
                    **trr_iteration(shape, args.device, args.dtype, args.rounds, args.tokens),
                }
            except Exception as exc:  # noqa: BLE001
                result["trr_iteration"] = {"shape": shape, "error": _error(exc)}
                traceback.print_exc()
            timed(result["trr_iteration"])
            _reset_peak(args.device)
            print("trr_iteration", json.dumps(result["trr_iteration"]), flush=True)
            save()
    result["complete"] = True
    save()
    print("->", args.out)
    return result


if __name__ == "__main__":
    main()
