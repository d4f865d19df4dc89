"""How the model trains over ranks: DDP or FSDP2 wrapping of the policy's model (torch's own).

:mod:`learners.distributed.collectives` holds the process group, the collectives, the seeds and
the pool sync; this module owns how the model is trained over ranks, chosen by
``--distributed.strategy`` (:class:`DistributedConfig`, wrapped by :func:`prepare`):

- **Gradients**: each rank's loss is normalised by the *global* minibatch count
  (:func:`learners.distributed.collectives.global_counts`), and torch's engine *sums* the
  gradients over ranks: ``ddp`` (``DistributedDataParallel`` with a sum comm hook instead of
  its default mean) or ``fsdp2`` (``fully_shard`` with gradient divide factor 1), so one update from
  N ranks x R rounds is the one-process update on N*R rounds. Every rank runs the same number
  of forward/backward passes per optimiser step (:func:`num_passes`; a rank with fewer
  micro-batches runs :func:`idle_pass`), and only the last one reduces
  (:func:`gradient_sync`).
- **Parameters** (``fsdp2``): sharded (ZeRO-3) inside an optimiser step (:func:`update_step`)
  and gathered whole on every rank outside it, so generation, validation on rank 0, the
  rollout engine's weight push and ``model/`` in a checkpoint see full weights without a
  collective (:func:`gathered_state_dict`). Checkpoints of a multi-process run hold the model
  and optimiser as a ``torch.distributed.checkpoint`` folder (``dcp/``,
  :mod:`learners.training.checkpoint`).

On one process every function here is the identity (or a null context).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist

from learners.distributed.collectives import broadcast_parameters, comm_device, world_size


@dataclass
class DistributedConfig:
    """How a multi-process launch (torchrun, accelerate launch) trains; ignored on one process.

    ``--distributed.strategy ddp|fsdp2`` picks torch's engine. Both sum the gradients over
    ranks (each rank's loss is already normalised by the global count,
    :func:`learners.distributed.collectives.global_counts`). accelerate opens the process group
    (:func:`learners.distributed.collectives.init`), but the model is wrapped with torch directly
    (:func:`prepare`): accelerate 1.15 turns its FSDP plugin on only for GPU-like backends (not
    ``MULTI_CPU``/gloo, where the tests run), and its ``prepare`` would own the optimiser and
    the loss scaling that :mod:`learners.algorithms.pg` does itself.
    """

    strategy: Literal["ddp", "fsdp2"] = "ddp"
    """``ddp``: every rank holds the whole model and optimiser,
    ``torch.nn.parallel.DistributedDataParallel`` sums the gradients. ``fsdp2``:
    ``torch.distributed.fsdp.fully_shard`` per decoder layer and on the root: parameters,
    gradients and AdamW state sharded over ranks during the update (ZeRO-3), full parameters
    gathered for rollouts (``docs/guide/scaling.md``)."""
    mixed_precision: Literal["none", "bf16", "fp16"] = "none"
    """``fsdp2`` only: ``MixedPrecisionPolicy(param_dtype=..., reduce_dtype=float32)``: the
    sharded master weights and AdamW state stay in the loaded dtype (load in ``--dtype
    float32``), forward/backward (and rollouts) run in this dtype; ``none`` computes in the
    loaded dtype."""
    cpu_offload: bool = False
    """``fsdp2`` only: ``CPUOffloadPolicy``: sharded parameters, gradients and the optimiser
    step live in CPU memory (copied to the GPU per layer for forward/backward)."""
    find_unused_parameters: bool = False
    """``ddp`` only: let DDP find parameters that get no gradient in a backward pass (a model
    whose forward skips some trainable weights); costs a graph traversal per step."""

    def __post_init__(self) -> None:
        if self.strategy not in ("ddp", "fsdp2"):
            raise ValueError(f"distributed.strategy must be ddp or fsdp2, got {self.strategy!r}")
        if self.mixed_precision not in ("none", "bf16", "fp16"):
            raise ValueError(
                f"distributed.mixed_precision must be none, bf16 or fp16, got "
                f"{self.mixed_precision!r}"
            )


def prepare(policy: Any, learner: Any, config: DistributedConfig | None = None) -> None:
    """Wrap ``policy.model`` for data-parallel training; point the optimiser at its parameters.

    Collective: call on every rank, after every rank holds the same weights
    (:func:`learners.distributed.collectives.broadcast_parameters`) and LoRA adapters are on (the
    learner's constructor adds them), before a checkpoint is loaded. The optimiser's parameter
    groups are pointed at the wrapped parameters, by name (``fully_shard`` replaces them by
    sharded ``DTensor`` s), so it must not hold state yet. No-op on one process.

    ``ddp``: ``policy.ddp_module`` is set to the ``DistributedDataParallel`` wrapper
    (``HFPolicy.token_logprobs`` forwards through it; ``policy.model`` stays the plain model
    for generation and saving), with a comm hook that sums instead of averaging and
    ``broadcast_buffers=False`` (no collective in a forward, so ranks may generate unevenly).
    ``fsdp2``: ``fully_shard`` on every module named in the model's ``_no_split_modules`` (the
    decoder layers), then on the root, with gradient divide factor 1 (a sum); the parameters
    are then gathered (:func:`update_step`).

    Raises:
        TypeError: if the policy has no ``model`` (a custom policy) on several ranks.
        RuntimeError: if the optimiser has stepped already.
    """
    if world_size() <= 1:
        return
    config = config or DistributedConfig()
    model = getattr(policy, "model", None)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"data-parallel training needs a policy with a torch ``model``; got {type(policy)}"
        )
    if any(learner.optimizer.state.values()):
        raise RuntimeError("prepare() must run before the optimiser's first step")
    names = {id(p): n for n, p in model.named_parameters()}
    if config.strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        dev = next(model.parameters()).device
        ddp = DistributedDataParallel(
            model,
            device_ids=[dev.index] if dev.type == "cuda" else None,
            forward_sync_buffers=False,
            find_unused_parameters=config.find_unused_parameters,
        )
        ddp.register_comm_hook(None, _sum_hook)
        policy.ddp_module = ddp
    else:
        # every rank shards its own copy: they must agree (LoRA adapters are initialised
        # after broadcast_parameters, from each rank's RNG); DDP broadcasts on its own
        broadcast_parameters(model)
        _fully_shard(model, config)
    # the optimiser's parameters by name: fully_shard replaced them by sharded DTensors
    params = dict(model.named_parameters())
    learner.params = policy.trainable_parameters()
    for group in learner.optimizer.param_groups:
        group["params"] = [params[names[id(p)]] for p in group["params"]]
    if config.strategy == "fsdp2":
        _gather(model)  # after the look-up: gathered, named_parameters are the full tensors


def _sum_hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks the annotations
    """DDP comm hook: all-reduce SUM of a gradient bucket (DDP's default divides by N).

    ``bucket`` is a ``dist.GradBucket``; returns a future of the reduced buffer. Left without
    annotations: DDP rejects a string annotation (``from __future__ import annotations``).
    """
    work = dist.all_reduce(bucket.buffer(), op=dist.ReduceOp.SUM, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def _fully_shard(model: torch.nn.Module, config: DistributedConfig) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft
    blocks = set(getattr(base, "_no_split_modules", None) or ())
    mesh = init_device_mesh(comm_device().type, (world_size(),))
    kwargs: dict[str, Any] = {"mesh": mesh}
    if config.mixed_precision != "none":
        dtype = torch.bfloat16 if config.mixed_precision == "bf16" else torch.float16
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    if config.cpu_offload:
        kwargs["offload_policy"] = CPUOffloadPolicy()
    for module in model.modules():
        if module is not model and type(module).__name__ in blocks:
            fully_shard(module, **kwargs)
    fully_shard(model, **kwargs)
    for module in _fsdp_modules(model):
        # a sum, as the loss is globally normalised: divide factor 1 with ReduceOp.SUM (the
        # factor alone becomes PREMUL_SUM, which gloo lacks; dividing by 1 is exact)
        module.set_gradient_divide_factor(1.0)
        module.set_force_sum_reduction_for_comms(True)


def _fsdp_modules(model: torch.nn.Module) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def is_sharded(model: torch.nn.Module) -> bool:
    """True when ``model`` was wrapped by ``fully_shard`` (FSDP2)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _gather(model: torch.nn.Module) -> None:
    """All-gather every FSDP2 unit and keep it gathered through forwards (collective)."""
    model.set_reshard_after_forward(False)  # recurses into the sub-units
    for module in _fsdp_modules(model):
        module.unshard()


def _shard(model: torch.nn.Module) -> None:
    """Free the gathered parameters; forwards all-gather per layer again (local)."""
    for module in _fsdp_modules(model):
        module.reshard()
    model.set_reshard_after_forward(True)


@contextlib.contextmanager
def update_step(policy: Any) -> Iterator[None]:
    """Around one optimiser step: FSDP2 parameters sharded inside, gathered again after.

    Inside, forwards all-gather layer by layer and backwards reduce-scatter (ZeRO-3); the
    optimiser steps the shards. On exit every unit is all-gathered and stays gathered, so
    generation and saving see the updated full weights without a collective. Also around a
    ``torch.distributed.checkpoint`` save or load (its state dicts name the sharded
    parameters). Collective under FSDP2 (every rank enters); a no-op otherwise. An exception
    inside skips the re-gather (another rank may have died).
    """
    model = getattr(policy, "model", None)
    if not isinstance(model, torch.nn.Module) or not is_sharded(model):
        yield
        return
    _shard(model)
    yield
    _gather(model)


def num_passes(local: int) -> int:
    """Forward/backward passes every rank makes in this optimiser step: the most any rank needs.

    DDP all-reduces in the last backward and FSDP2 all-gathers in every forward, so all ranks
    must run as many passes; a rank with fewer micro-batches fills up with :func:`idle_pass`.
    ``local`` on one process (one all-reduce MAX otherwise).
    """
    if world_size() <= 1:
        return local
    t = torch.tensor([local], dtype=torch.float64, device=comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def gradient_sync(policy: Any, last: bool) -> contextlib.AbstractContextManager[Any]:
    """Context of one backward pass: reduce gradients over ranks only when ``last``.

    DDP: ``no_sync()`` on all but the last pass (gradients accumulate locally, the last
    backward all-reduces the sum); FSDP2: ``set_requires_gradient_sync(last)``. A null
    context on one process.
    """
    ddp = getattr(policy, "ddp_module", None)
    if ddp is not None and world_size() > 1:
        return contextlib.nullcontext() if last else ddp.no_sync()
    model = getattr(policy, "model", None)
    if isinstance(model, torch.nn.Module) and is_sharded(model):
        model.set_requires_gradient_sync(last)
    return contextlib.nullcontext()


def idle_pass(policy: Any) -> None:
    """A forward/backward of one pad token with loss 0: zero gradients, a real pass's collectives.

    For a rank with fewer micro-batches (or none) than another in this optimiser step.
    """
    pad = policy.tokenizer.pad_token_id
    logp, _ = policy.token_logprobs([[pad]], [[pad]])
    (logp.sum() * 0.0).backward()


def require_prepared(policy: Any) -> None:
    """Raise unless a multi-process run's policy was wrapped by :func:`prepare`.

    Raises:
        RuntimeError: on several ranks without DDP or FSDP2 (gradients would not be reduced).
    """
    if world_size() <= 1:
        return
    model = getattr(policy, "model", None)
    if getattr(policy, "ddp_module", None) is None and not (
        isinstance(model, torch.nn.Module) and is_sharded(model)
    ):
        raise RuntimeError(
            "several ranks but the model is neither DDP- nor FSDP2-wrapped: call "
            "learners.distributed.data_parallel.prepare(policy, learner, config) before training"
        )


def clip_grad_norm(params: Sequence[torch.nn.Parameter], max_norm: float) -> float:
    """``torch.nn.utils.clip_grad_norm_`` over ``params``; the total norm as a float.

    FSDP2's gradients are ``DTensor`` shards: the norm is then a ``DTensor``, whose
    ``full_tensor()`` is the global norm (a collective).
    """
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    full = getattr(norm, "full_tensor", None)
    return float(full() if full is not None else norm)


def gathered_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor] | None:
    """The full weights of an FSDP2 model outside :func:`update_step` (local, no collective).

    While gathered, ``named_parameters`` yields the full tensors; ``model.state_dict()`` would
    reshard the model first (FSDP2's state-dict hook) and return the sharded ``DTensor`` s,
    leaving the next forward to all-gather: so it is not called here (nor may anything else
    call it between steps). Returns what ``state_dict`` would name (parameters, tied ones
    under every name, and persistent buffers) with full tensors, or ``None`` for a model that
    is not sharded (its own ``state_dict`` is the full one).

    Raises:
        RuntimeError: if the model is sharded now (inside :func:`update_step`).
    """
    if not is_sharded(model):
        return None
    from torch.distributed.tensor import DTensor

    out: dict[str, torch.Tensor] = {}
    for prefix, module in model.named_modules(remove_duplicate=False):
        dot = f"{prefix}." if prefix else ""
        for name, param in module._parameters.items():
            if param is not None:
                out[dot + name] = param
        for name, buf in module._buffers.items():
            if buf is not None and name not in module._non_persistent_buffers_set:
                out[dot + name] = buf
    if any(isinstance(v, DTensor) for v in out.values()):
        raise RuntimeError("the FSDP2 model is sharded (inside update_step): nothing to save")
    return out
