import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory):
    """A tiny random chat model (learners.policy.tiny), built once per test session."""
    from learners.policy.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"))
