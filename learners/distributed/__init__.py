"""Data-parallel training over ranks (torchrun, accelerate launch) on torch's own engines.

- :mod:`learners.distributed.collectives`: the process group, the collectives and what SAGE
  shares across ranks (global advantages, loss counts, metrics, the pool, per-rank seeds and
  RNG states). On one process every function there is the identity.
- :mod:`learners.distributed.data_parallel`: how the model trains over ranks,
  ``--distributed.strategy ddp|fsdp2`` (``DistributedConfig``, ``prepare``, ``update_step``).

Import the modules themselves (``from learners.distributed import collectives``); this
package exports nothing. ``docs/guide/scaling.md`` has the whole picture.
"""
