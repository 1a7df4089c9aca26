from pathlib import Path

import pytest


def make_tiny_llama_dir(directory: Path) -> Path:
    """`random_llama` with SmolLM2's real tokenizer and chat template, saved to ``directory``."""
    from transformers import AutoTokenizer

    from searchgym.agents.policies.models import random_llama, resolve_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_tokenizer("smollm2-135m-instruct"))
    random_llama(tokenizer).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    return make_tiny_llama_dir(tmp_path_factory.mktemp("tiny-llama"))
