"""``ct2``: CTranslate2 on the CPU, on a converted copy of the trainer's weights."""

from __future__ import annotations

import contextlib
import gc
import math
import os
import types
from collections.abc import Iterator
from typing import Any

import torch

from learners.engines.config import RolloutConfig
from learners.engines.hf_engine import HFEngine
from learners.engines.interface import EngineHost
from learners.engines.registry import import_engine_module, register_engine
from learners.engines.weights import inference_weights
from learners.memory import release_memory
from learners.types import Completion, SamplingConfig

GREEDY_FLOAT32 = -1.0
"""The model key of a quantised engine's greedy calls (``RolloutConfig.ct2_greedy_float32``): a
float32 conversion at temperature 1 (no real temperature is negative)."""


def _plain_model(host: EngineHost, shell: list[torch.nn.Module]) -> torch.nn.Module:
    """The host's model as a plain transformers model (LoRA merged into a kept shell)."""
    model = host.model
    from torch.distributed.fsdp import FSDPModule

    fsdp = isinstance(model, FSDPModule)  # its hooks and process group do not deep-copy
    if not hasattr(model, "peft_config") and not fsdp:
        return model
    if not shell:  # one plain copy of the base, built once, refilled at every sync
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        from transformers import AutoModelForCausalLM

        plain = AutoModelForCausalLM.from_config(base.config, dtype=host.dtype)
        plain.eval()
        shell.append(plain)
    plain = shell[0]
    with torch.no_grad():
        state = dict(inference_weights(model))
        missing, unexpected = plain.load_state_dict(state, strict=False)
        if unexpected or [k for k in missing if "lm_head" not in k]:
            raise RuntimeError(
                f"ct2: LoRA-merged / gathered weights do not fit the base: missing={missing[:5]} "
                f"unexpected={unexpected[:5]}"
            )
    return plain


CT2_ROW_COST = 0.3
"""Extra cost of one more row in a CTranslate2 decoding step, in one-row steps (fitted to
the default model in float32 on a 2-core CPU; ``docs/write-ups/speed.md`` has the measurement)."""


def length_groups(lengths: list[int], budgets: list[int], batch_size: int) -> list[list[int]]:
    """Split rows into batches for CTranslate2, which does not pad its prompts.

    CTranslate2 forwards a batch's prompts at once only up to the shortest one; every
    further prompt token of a longer row costs a whole decoding step of the batch. So rows
    are sorted by prompt length and cut into contiguous groups (at most ``batch_size`` rows)
    that minimise the estimated decoding time, ``sum(steps * (1 + CT2_ROW_COST * (rows -
    1)))`` with ``steps = longest - shortest prompt + largest budget`` (dynamic programming,
    O(n * batch_size)).

    Returns:
        Row indices per group, groups in order of prompt length.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    n = len(order)
    best = [0.0] + [math.inf] * n
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        budget = 0
        for i in range(j - 1, max(-1, j - 1 - batch_size), -1):
            budget = max(budget, budgets[order[i]])
            steps = lengths[order[j - 1]] - lengths[order[i]] + budget
            cost = best[i] + steps * (1.0 + CT2_ROW_COST * (j - i - 1))
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups = []
    j = n
    while j > 0:
        groups.append(order[cut[j] : j])
        j = cut[j]
    return groups[::-1]


def ct2_workers(config: RolloutConfig) -> tuple[int, int]:
    """``(threads, workers)``: ``ct2_threads`` (0: torch's) and ``ct2_workers``.

    Two single-threaded generators decoding two batches at once beat one two-threaded
    generator decoding them in turn on the demo's calls (``benchmarks/perf/README.md``), but each holds
    its own copy of the converted model, so 1 is the default.
    """
    threads = config.ct2_threads or torch.get_num_threads()
    return threads, config.ct2_workers


def worker_shares(
    groups: list[list[int]], lengths: list[int], budgets: list[int], workers: int
) -> list[list[list[int]]]:
    """The groups of each worker: longest estimated decoding first, to the least loaded.

    A group's estimate is :func:`length_groups`' cost of it. Deterministic (ties go to the
    lower worker), so a seed fixes which worker's random stream samples which rows.
    """

    def cost(idx: list[int]) -> float:
        steps = max(lengths[i] for i in idx) - min(lengths[i] for i in idx)
        steps += max(budgets[i] for i in idx)
        return steps * (1.0 + CT2_ROW_COST * (len(idx) - 1))

    shares: list[list[list[int]]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for g in sorted(range(len(groups)), key=lambda g: (-cost(groups[g]), g)):
        w = min(range(workers), key=lambda w: (load[w], w))
        shares[w].append(groups[g])
        load[w] += cost(groups[g])
    return shares


@contextlib.contextmanager
def _no_gc(module: Any) -> Iterator[None]:
    """``module.gc.collect`` as a no-op inside.

    CTranslate2's loaders collect after every layer (to free the modules they delete from a
    model they loaded themselves), slow on a loaded machine; our mirror's tensors
    are the trainer's, so nothing would be freed.
    """
    real = module.gc
    module.gc = types.SimpleNamespace(collect=lambda *args: 0)
    try:
        yield
    finally:
        module.gc = real


@register_engine(
    "ct2",
    requires="ctranslate2",
    requires_label="CTranslate2",
    install="pip install ctranslate2==4.8.5",
    syncs_weights=True,
)
class CT2Engine:
    """CTranslate2 (``ctranslate2.Generator``) on a converted copy of the trainer's weights.

    CTranslate2 is a C++ inference engine for transformers (OpenNMT,
    https://github.com/OpenNMT/CTranslate2); its decoding loop runs without Python between
    tokens. The host's model is converted in memory with CTranslate2's own
    ``TransformersConverter`` (any architecture it supports: Llama, Qwen2, Mistral ...; LoRA
    merged first, :func:`inference_weights`) into a temporary folder (``/dev/shm`` when it
    exists) and loaded from there; :meth:`sync_weights` converts again after every update,
    and :meth:`release` drops the converted models during the update.

    Faithfulness: the sampling temperature T is folded into the converted output head
    (``lm_head.weight / T``), so CTranslate2 samples ``softmax(logits / T)`` at its own
    temperature 1 and reports ``log_softmax(logits / T)`` of each sampled token, the
    quantity the learner recomputes (one converted model per temperature in use; greedy calls
    use T = 1, as ``hf`` does; loading one drops the loaded models that have not sampled since
    the last sync, :meth:`_drop_unsampled`, so a greedy validation after a sync holds one
    model, not two). A per-token callback keeps every row's token budget and stops
    a row on a stop string with ``hf``'s own rule (transformers' ``StopStringCriteria`` on the
    row, then the string must lie in the generated text, :class:`RowLimits`), so
    completions and their cut points are ``hf``'s. CTranslate2 does not pad prompts, so rows
    are batched by prompt length (:func:`length_groups`, at most ``sampling.batch_size``),
    and the batches are decoded in parallel by ``ct2_workers`` generators
    (:func:`worker_shares`), each seeded from the host's generator at its first call after a load.
    ``ct2_compute_type`` ``float32`` (default) is faithful to float32 training; ``int8`` is
    faster and samples from a quantised model (pair it with ``learner.tis_cap``); greedy calls
    then decode a float32 model of the same weights unless ``ct2_greedy_float32`` is off
    (one more model, keyed :data:`GREEDY_FLOAT32`). The critic's score distribution
    (:meth:`~learners.policy.HFPolicy.score_distribution`) is read from the trainer's model, as
    with every engine.

    Args:
        host: The policy (:class:`EngineHost`).
        config: ``ct2_*`` settings.

    Raises:
        ImportError: without CTranslate2 (``EngineSpec.missing``).
    """

    def __init__(self, host: EngineHost, config: RolloutConfig | None = None) -> None:
        self.host = host
        self.config = config or RolloutConfig(engine="ct2")
        self.ct2 = import_engine_module("ct2")
        self._generators: dict[float, Any] = {}
        self._fresh: set[float] = set()  # temperatures whose generators are not seeded yet
        # seeds each temperature's generators got since the last sync (kept when a model that
        # never sampled is dropped, so that reloading it restores the same random streams)
        self._seeds: dict[float, list[int]] = {}
        self._sampled: set[float] = set()  # temperatures that sampled since the last sync
        # temperatures whose models were released after they sampled: only a sync restores them
        self._spent: set[float] = set()
        self._shell: list[torch.nn.Module] = []
        self._stops = HFEngine(host)  # its cached StopStringCriteria
        self._last_temperature = 1.0
        self.syncs = 0
        """Conversions so far (one per temperature per sync)."""
        self.sync_seconds = 0.0
        """Seconds spent converting and loading weights so far."""

    def _key(self, sampling: SamplingConfig) -> float:
        """The key of the converted model a call uses.

        Its sampling temperature (1.0 for a greedy call), or :data:`GREEDY_FLOAT32` for a greedy
        call of a quantised engine (``ct2_greedy_float32``).
        """
        if sampling.do_sample:
            return float(sampling.temperature)
        if self.config.ct2_greedy_float32 and self.config.ct2_compute_type != "float32":
            return GREEDY_FLOAT32
        return 1.0

    def _convert(self, temperature: float) -> Any:
        """Convert the host's current weights, output head divided by ``temperature``.

        ``temperature`` :data:`GREEDY_FLOAT32` converts a float32 model at temperature 1.
        """
        import copy
        import shutil
        import tempfile
        import time

        from ctranslate2.converters import TransformersConverter
        from ctranslate2.converters import transformers as converters_module

        t0 = time.perf_counter()
        host = self.host
        model = _plain_model(host, self._shell)
        tensors = list(model.parameters()) + list(model.buffers())
        # a structural copy sharing every tensor: CTranslate2's loaders delete submodules
        mirror = copy.deepcopy(model, {id(t): t for t in tensors})
        key, compute_type = temperature, self.config.ct2_compute_type
        if key == GREEDY_FLOAT32:
            temperature, compute_type = 1.0, "float32"
        if temperature != 1.0:
            head = mirror.get_output_embeddings()
            head.weight = torch.nn.Parameter(
                head.weight.detach() / temperature, requires_grad=False
            )
            if getattr(head, "bias", None) is not None:
                head.bias = torch.nn.Parameter(head.bias.detach() / temperature, False)

        class _InMemory(TransformersConverter):
            def load_model(self, model_class: Any, name: str, **kwargs: Any) -> Any:
                return mirror

            def load_tokenizer(self, tokenizer_class: Any, name: str, **kwargs: Any) -> Any:
                return host.tokenizer

            def _load(self) -> Any:
                spec = super()._load()
                # skip the O(variables^2) search for identical tensors to alias (it only
                # saves the memory of a tied output head; 5 s of a 135M model's sync)
                spec._alias_variables = lambda: None
                return spec

        root = "/dev/shm" if os.path.isdir("/dev/shm") else None
        folder = tempfile.mkdtemp(prefix="sage-ct2-", dir=root)
        try:
            config_dir = tempfile.mkdtemp(prefix="sage-ct2-config-", dir=root)
            try:
                model.config.save_pretrained(config_dir)  # the converter reads the config
                with torch.no_grad(), _no_gc(converters_module):
                    # float32 files, quantised at load: the converter quantises in place, and
                    # the mirror's tensors are the trainer's (test_ct2_int8_samples_...)
                    _InMemory(config_dir).convert(folder, quantization=None, force=True)
            finally:
                shutil.rmtree(config_dir, ignore_errors=True)
            generators = self._load(folder, compute_type)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        gc.collect()  # the converter's class holds the mirror (and a scaled head) in a cycle
        release_memory()  # the converter's own copies of the weights, freed but kept by malloc
        self.syncs += 1
        self.sync_seconds += time.perf_counter() - t0
        return generators

    def _load(self, folder: str, compute_type: str) -> list[Any]:
        """One generator per worker (:func:`ct2_workers`) from a converted model's folder,
        not yet seeded (:meth:`_seed` runs at its first use)."""
        threads, workers = ct2_workers(self.config)
        return [
            self.ct2.Generator(
                folder,
                device="cpu",
                compute_type=compute_type,
                intra_threads=max(1, threads // workers),
                inter_threads=1,
            )
            for _ in range(workers)
        ]

    def _seed(self, generators: list[Any], seeds: list[int]) -> None:
        """Seed freshly loaded generators, one seed each (drawn from the host's generator by
        :meth:`_seeds_of`).

        CTranslate2 samples with a random generator per worker thread, seeded once, at its
        first draw, from the global seed of that moment (``set_random_seed`` does not reseed a
        thread that has drawn). So each generator draws once, right after the global seed is
        set from the host's generator: a seed fixes every worker's stream, and the workers'
        streams differ. This runs at the first generate call after a load, not at the load
        itself, so that a run resumed from a checkpoint (whose fresh engine loads at its first
        call) draws from the host's generator where the uninterrupted run did.
        """
        warm = [self.host.tokenizer.convert_ids_to_tokens(min(self.host.eos_ids or {0}))]
        for seed, generator in zip(seeds, generators):
            self.ct2.set_random_seed(seed)
            generator.generate_batch([warm], max_length=1, sampling_topk=0)

    def _seeds_of(self, temperature: float, workers: int) -> list[int]:
        """The seeds of ``temperature``'s generators: drawn from the host's generator the
        first time since the last sync, the same ones when a dropped model is reloaded."""
        if temperature not in self._seeds:
            self._seeds[temperature] = [
                int(torch.randint(0, 2**31 - 1, (1,), generator=self.host.generator))
                for _ in range(workers)
            ]
        return self._seeds[temperature]

    def _generator(self, temperature: float, sample: bool) -> Any:
        """The generators at ``temperature`` (converted and seeded on first use).

        Loading a model first drops every loaded model that has not sampled since the last
        sync (:meth:`_drop_unsampled`), so that a greedy validation between a sync and the
        next rollout holds one converted model, not two.
        """
        if temperature not in self._generators:
            if temperature in self._spent:
                raise RuntimeError(
                    f"ct2: the model at temperature {temperature} was released after it sampled "
                    "(its random streams cannot be restored); call sync_weights before "
                    "generating at that temperature again"
                )
            self._drop_unsampled()
            self._generators[temperature] = self._convert(temperature)
            self._fresh.add(temperature)
        self._last_temperature = temperature
        if temperature in self._fresh:
            self._fresh.discard(temperature)
            generators = self._generators[temperature]
            self._seed(generators, self._seeds_of(temperature, len(generators)))
        if sample:
            self._sampled.add(temperature)
        return self._generators[temperature]

    def _drop_unsampled(self) -> None:
        """Drop the loaded models that have not sampled since the last sync (and give their
        memory back to the system, :func:`release_memory`).

        Exact: greedy decoding draws no random numbers (CTranslate2's ``sampling_topk=1`` is
        an argmax), so such a model's generators are still in the state their seeds set, and
        reloading it (the same weights, the same seeds, :meth:`_seeds_of`) restores them. A
        model that has sampled is kept, since its random streams have moved on.
        """
        dropped = [t for t in self._generators if t not in self._sampled]
        for t in dropped:
            del self._generators[t]
            self._fresh.discard(t)
        if dropped:
            gc.collect()
            release_memory()

    def release(self) -> None:
        """Drop every converted model and give its memory back (:func:`release_memory`).

        The loop calls it before each update (whose peak then holds no converted copy;
        docs/write-ups/memory.md, "Where the memory goes"); the :meth:`sync_weights` after it
        converts as it would anyway (it drops the models and seeds either way: the same
        weights, seeds, conversions).
        Before that sync, an unsampled model is reloaded with its seeds when next used (as
        after :meth:`_drop_unsampled`); a sampled one cannot be (its streams moved on), so
        generating at its temperature raises ``RuntimeError``.
        """
        self._spent |= self._sampled & set(self._generators)
        self._generators.clear()
        self._fresh.clear()
        gc.collect()
        release_memory()

    def sync_weights(self) -> None:
        """Convert the trainer's current weights now, for the temperature used last.

        Models at other temperatures are dropped and converted again when next used; the old
        models are freed (and their memory given back, :func:`release_memory`) before the
        conversion.
        """
        self._generators.clear()
        self._seeds.clear()
        self._sampled.clear()
        self._spent.clear()
        self._fresh.clear()
        gc.collect()
        release_memory()
        self._generators[self._last_temperature] = self._convert(self._last_temperature)
        self._fresh = {self._last_temperature}

    def rollout_session(self) -> contextlib.AbstractContextManager[None]:
        """No state across calls: a null context."""
        return contextlib.nullcontext()

    def close(self) -> None:
        """Drop the converted models."""
        self._generators.clear()
        self._fresh.clear()
        self._seeds.clear()
        self._sampled.clear()
        self._spent.clear()
        self._shell.clear()
        gc.collect()
        release_memory()

    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        """See :meth:`RolloutEngine.generate`.

        Raises:
            ValueError: if ``sampling.top_p`` < 1 (CTranslate2 reports log-probs before the
                nucleus is renormalised, ``hf`` after none; not compared yet).
        """
        if not prompts:
            return []
        if sampling.do_sample and sampling.top_p < 1.0:
            raise ValueError("the ct2 engine samples with top_p = 1 only; use hf for top_p < 1")
        generators = self._generator(self._key(sampling), sampling.do_sample)
        results: list[Completion | None] = [None] * len(prompts)
        lengths = [len(p) for p in prompts]
        groups = length_groups(lengths, budgets, sampling.batch_size)
        shares = worker_shares(groups, lengths, budgets, len(generators))
        for st in set(stops):  # built (and cached) here, not racing in the workers
            if st:
                self._stops.stop_criteria(st)

        def run(worker: int) -> None:  # a worker's groups in order, on its own generator
            for idx in shares[worker]:
                batch = self._generate_batch(
                    generators[worker],
                    [prompts[i] for i in idx],
                    sampling,
                    [budgets[i] for i in idx],
                    [stops[i] for i in idx],
                )
                for i, comp in zip(idx, batch):
                    results[i] = comp

        busy = [w for w in range(len(generators)) if shares[w]]
        if len(busy) == 1:
            run(busy[0])
        else:  # CTranslate2 releases the GIL while it decodes
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(len(busy)) as pool:
                for future in [pool.submit(run, w) for w in busy]:
                    future.result()
        self.host.tokens_generated += sum(len(c.completion_ids) for c in results if c)
        return results  # type: ignore[return-value]

    def _generate_batch(
        self,
        generator: Any,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        host = self.host
        tok = host.tokenizer
        n = len(prompts)
        ids: list[list[int]] = [[] for _ in range(n)]
        logps: list[list[float]] = [[] for _ in range(n)]
        ended = [False] * n  # by EOS or a stop string
        criteria = [self._stops.stop_criteria(st) if st else None for st in stops]

        def step(result: Any) -> bool:
            row = result.batch_id
            if ended[row] or len(ids[row]) >= budgets[row]:
                return True
            tokid = int(result.token_id)
            ids[row].append(tokid)
            logps[row].append(float(result.log_prob))
            if tokid in host.eos_ids:
                ended[row] = True
                return True
            crit = criteria[row]
            if crit is not None:
                seq = torch.tensor([prompts[row] + ids[row]], dtype=torch.long)
                if bool(crit(seq, None)[0]):
                    text = tok.decode(ids[row], skip_special_tokens=True)
                    if any(s in text for s in stops[row]):
                        ended[row] = True
                        return True
            return len(ids[row]) >= budgets[row]

        eos = sorted(host.eos_ids)
        generator.generate_batch(
            [tok.convert_ids_to_tokens(p) for p in prompts],
            max_length=max(budgets),
            min_length=min(int(sampling.min_new_tokens), max(budgets)),
            end_token=eos or None,
            return_end_token=True,
            include_prompt_in_result=False,
            return_scores=True,
            sampling_topk=0 if sampling.do_sample else 1,
            sampling_temperature=1.0,
            callback=step,
        )
        completions = []
        for row, p in enumerate(prompts):
            completions.append(
                Completion(
                    text=tok.decode(ids[row], skip_special_tokens=True),
                    prompt_ids=list(p),
                    completion_ids=ids[row],
                    logprobs=logps[row],
                    truncated=not ended[row] and len(ids[row]) >= budgets[row],
                )
            )
        return completions
