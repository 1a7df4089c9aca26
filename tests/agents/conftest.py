from pathlib import Path

import pytest


def make_tiny_llama_dir(directory: Path) -> Path:
    """A random 2-layer Llama with SmolLM2's real tokenizer and chat template. Large initial
    weights make its next-token distributions peaked, so greedy decoding is stable under
    padding and batching."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from searchgym.agents.models import resolve_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_tokenizer("smollm2-135m-instruct"))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        initializer_range=0.5,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)  # test code: the same random model in every run
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    return make_tiny_llama_dir(tmp_path_factory.mktemp("tiny-llama"))
