"""``HFPolicy``: a transformers causal LM shared by every role.

Builds prompts (chat template, generation prompt, the observation's response prefix), samples
through its rollout engine (:mod:`learners.engines`), computes token log-probs for learners
(under the current weights and the KL reference), adds LoRA adapters (peft), saves and loads
weights. The critic's score distribution is read by :mod:`learners.policy.critic_scores`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from learners.policy import critic_scores
from learners.policy.loading import DEFAULT_MODEL, pick_device, pick_dtype, resolve_model
from learners.policy.logprobs import shared_prompt_logprobs, token_logprobs
from learners.types import Completion, LoRAConfig, SamplingConfig

if TYPE_CHECKING:
    from learners.engines.config import RolloutConfig
    from learners.engines.interface import RolloutEngine

logger = logging.getLogger(__name__)


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
        self.scorer: torch.nn.Module | None = None
        """A frozen copy of the weights that ``score_distribution(..., frozen=True)`` reads
        (:meth:`freeze_scorer`); ``None`` until then."""
        self.share_prompts = False
        """Forward a prompt shared by several completions once in :meth:`token_logprobs`
        (:func:`learners.policy.logprobs.shared_prompt_logprobs`); set through
        :meth:`enable_prompt_sharing`, which checks the model first."""
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

        :func:`learners.policy.logprobs.token_logprobs` on this model (right-padded with the pad
        id, logits / ``temperature``); has grad when grad is enabled.

        Returns:
            ``(logprobs, mask)``, both ``[B, C_max]`` float32 on :attr:`device`.
        """
        pad = self.tokenizer.pad_token_id
        # several ranks with DDP: forward through its wrapper
        # (learners.distributed.data_parallel.prepare)
        model = getattr(self, "ddp_module", None) or self.model
        return token_logprobs(
            model, prompts, completions, pad, temperature, self.device, self.share_prompts
        )

    @torch.no_grad()
    def enable_prompt_sharing(self, tolerance: float = 1e-3) -> bool:
        """Turn on shared-prompt packing in :meth:`token_logprobs` if this model honours it.

        Packing needs a model that takes a 4-D attention mask and ``position_ids``; one that
        ignored them would return wrong log-probs without an error. So a short synthetic batch
        (one prompt, two completions) is scored both ways in evaluation mode first; packing
        is turned on only if every log-prob agrees within ``tolerance`` nats, else a warning
        says why it stays off. Run it before
        :func:`learners.distributed.data_parallel.prepare` (every rank runs the same check on
        the same weights).

        Returns:
            Whether packing is now on (:attr:`share_prompts`).
        """
        vocab = int(getattr(self.model.config, "vocab_size", 0) or 0)
        if vocab < 16:
            return False
        prompts = [[1, 5, 9, 13, 2, 7], [1, 5, 9, 13, 2, 7]]
        completions = [[3, 11, 4], [6, 8]]
        pad = self.tokenizer.pad_token_id
        was_training = self.model.training
        self.model.eval()
        try:
            plain, mask = token_logprobs(self.model, prompts, completions, pad, 1.0, self.device)
            packed, _ = shared_prompt_logprobs(
                self.model, prompts, completions, pad, 1.0, self.device
            )
            gap = float(((plain - packed).abs() * mask).max())
        except (TypeError, ValueError, RuntimeError) as exc:  # no 4-D mask / position_ids
            gap, why = float("inf"), f"{type(exc).__name__}: {exc}"
        else:
            why = f"packed and plain log-probs differ by {gap:.2g} nats"
        finally:
            self.model.train(was_training)
        self.share_prompts = gap <= tolerance
        if not self.share_prompts:
            logger.warning("shared-prompt packing stays off for %s (%s)", self.name, why)
        return self.share_prompts

    def keep_reference(self) -> None:
        """Fix the current weights as the KL reference of :meth:`reference_logprobs`.

        With LoRA the reference is the base under peft's ``disable_adapter()`` (no copy; the
        adapters started at zero, so that is the model as it was when they were added).
        Without LoRA it is a frozen deep copy of the model (twice the weights in memory).
        """
        if self.lora is not None:
            self._reference = None
            return
        self._reference = self._frozen_copy()

    def freeze_scorer(self) -> None:
        """Fix the current weights as the scorer of ``score_distribution(..., frozen=True)``.

        A frozen deep copy (the weights once more in memory; with LoRA the adapters as they
        are now), in eval mode and without gradients; later updates do not reach it. The
        quality gate reads it under ``TrainConfig.gate_critic = "warm_start"``.
        """
        self.scorer = self._frozen_copy()

    def _frozen_copy(self) -> torch.nn.Module:
        """A deep copy of the model in eval mode, without gradients."""
        frozen = copy.deepcopy(self.model).eval()
        for p in frozen.parameters():
            p.requires_grad_(False)
        return frozen

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
        pad = self.tokenizer.pad_token_id
        with self._reference_model() as model:
            return token_logprobs(
                model, prompts, completions, pad, temperature, self.device, self.share_prompts
            )

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

    def score_distribution(
        self,
        observations: list[dict[str, str]],
        temperature: float = 1.0,
        max_prompt_tokens: int = 2048,
        batch_size: int = 16,
        frozen: bool = False,
    ) -> list[tuple[float, ...] | None]:
        """The critic's distribution over the scores 1-10 it would write after the prefix.

        :func:`learners.policy.critic_scores.score_distribution` on this policy (one forward
        pass per batch, at ``temperature``, not renormalised); ``None`` per observation when
        the tokenizer writes a score 1-9 as more than one token. ``frozen``: read the
        weights :meth:`freeze_scorer` fixed instead of the current ones.

        Raises:
            RuntimeError: if ``frozen`` and :meth:`freeze_scorer` was not called.
        """
        if frozen and self.scorer is None:
            raise RuntimeError("no frozen scorer: call freeze_scorer() first")
        if getattr(self, "_score_tokens", False) is False:
            self._score_tokens = critic_scores.score_tokens(self.tokenizer)
        return critic_scores.score_distribution(
            self,
            self._score_tokens,
            observations,
            temperature,
            max_prompt_tokens,
            batch_size,
            model=self.scorer if frozen else None,
        )

    def use_engine(self, config: RolloutConfig | str | None = None) -> None:
        """Generate through the engine ``config`` names from now on (closing the current one).

        Raises:
            ValueError: on an unknown engine.
            ImportError: for ``vllm`` without vLLM installed.
        """
        from learners.engines.factory import make_engine

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

    def release_engine(self) -> None:
        """Let the rollout engine free its copy of the weights before an update.

        ``ct2`` drops its converted models (the :meth:`sync_engine` after the update loads the
        new weights); the other engines hold no copy and do nothing. An engine without a
        ``release`` method (one registered elsewhere) is left as it is.
        """
        release = getattr(self.engine, "release", None)
        if release is not None:
            release()

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
        from learners.distributed.data_parallel import gathered_state_dict

        # FSDP2 (learners.distributed.data_parallel): the gathered full weights, not the
        # sharded state dict
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
