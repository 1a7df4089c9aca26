from pathlib import Path

import pytest

from searchgym.retrievers import read_corpus

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def tiny_corpus_path() -> Path:
    return FIXTURES / "tiny_corpus.jsonl"


def make_tiny_encoder_dir(directory: Path, corpus_path: Path) -> Path:
    """Save a random 2-layer, 32-d BERT with a WordPiece vocabulary learnt on the corpus."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    texts = [f"{d.title}\n{d.text}" for d in read_corpus(corpus_path)]
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=300, special_tokens=special))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[(t, tokenizer.token_to_id(t)) for t in ("[CLS]", "[SEP]")],
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    ).save_pretrained(directory)
    config = BertConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)  # test code: the random encoder must be the same in every run
    BertModel(config).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory, tiny_corpus_path) -> Path:
    return make_tiny_encoder_dir(tmp_path_factory.mktemp("tiny-bert"), tiny_corpus_path)
