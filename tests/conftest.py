from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def tiny_corpus_path() -> Path:
    return FIXTURES / "tiny_corpus.jsonl"
