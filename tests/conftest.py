import sys
from pathlib import Path

import pytest

from searchgym.retrievers import read_corpus

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _no_accelerator_state_between_tests():
    """accelerate keeps one state per process, and an `Accelerator` refuses a mixed precision other
    than the one it holds: trl's GRPOTrainer (bf16, in tests/agents/integrations/test_trl_env.py)
    would otherwise make every later GRPO test fail. Each test leaves none behind."""
    yield
    state = sys.modules.get("accelerate.state")  # not imported: nothing to reset
    if state is not None:
        state.AcceleratorState._reset_state()


@pytest.fixture(scope="session")
def tiny_corpus_path() -> Path:
    return FIXTURES / "tiny_corpus.jsonl"


def make_tiny_tokenizer(corpus_path: Path, *, pairs: bool = False):
    """A BERT-style WordPiece tokenizer (vocabulary of 300) learnt on the corpus; ``pairs`` adds the
    ``[CLS] A [SEP] B [SEP]`` template a cross-encoder reads."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    texts = [f"{d.title}\n{d.text}" for d in read_corpus(corpus_path)]
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=300, special_tokens=special))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        **({"pair": "[CLS] $A [SEP] $B:1 [SEP]:1"} if pairs else {}),
        special_tokens=[(t, tokenizer.token_to_id(t)) for t in ("[CLS]", "[SEP]")],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        **({"model_input_names": ["input_ids", "token_type_ids", "attention_mask"]} if pairs else {}),
    )


def tiny_bert_config(vocab_size: int, **kwargs):
    """A 2-layer, 32-d BERT configuration."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        **kwargs,
    )


def make_tiny_encoder_dir(directory: Path, corpus_path: Path) -> Path:
    """Save a random 2-layer, 32-d BERT with a WordPiece vocabulary learnt on the corpus."""
    import torch
    from transformers import BertModel

    tokenizer = make_tiny_tokenizer(corpus_path)
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)  # test code: the random encoder must be the same in every run
    BertModel(tiny_bert_config(len(tokenizer))).save_pretrained(directory)
    return directory


def make_tiny_cross_encoder_dir(directory: Path, corpus_path: Path, num_labels: int = 1) -> Path:
    """Save a random tiny BertForSequenceClassification (``num_labels`` logits) whose tokenizer
    reads (query, passage) pairs."""
    import torch
    from transformers import BertForSequenceClassification

    tokenizer = make_tiny_tokenizer(corpus_path, pairs=True)
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)  # test code: the random model must be the same in every run
    # a wide initialisation spreads the random scores, so no two candidates tie by accident
    config = tiny_bert_config(len(tokenizer), num_labels=num_labels, initializer_range=0.5)
    BertForSequenceClassification(config).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory, tiny_corpus_path) -> Path:
    return make_tiny_encoder_dir(tmp_path_factory.mktemp("tiny-bert"), tiny_corpus_path)


@pytest.fixture(scope="session")
def tiny_cross_encoder_dir(tmp_path_factory, tiny_corpus_path) -> Path:
    return make_tiny_cross_encoder_dir(tmp_path_factory.mktemp("tiny-cross-encoder"), tiny_corpus_path)


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


class ScriptedSimulatorPolicy:
    """A policy backend that only writes search results: the gold answer the prompt shows."""

    name = "scripted"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def chat(self, conversations, params):
        from searchgym.generation import Completion

        prompts = [conv[-1]["content"] for conv in conversations]
        self.prompts += prompts
        answers = [p.split("The correct answer is: ", 1)[1].split("\n", 1)[0] for p in prompts]
        return [Completion(text=f"Doc 1 (Title: Sim): It is {a}.") for a in answers]

    def generate(self, prompts, params):
        raise NotImplementedError("the scripted simulator only chats")


@pytest.fixture
def scripted_backend(monkeypatch):
    """``scripted:NAME`` names a `ScriptedSimulatorPolicy` (one per process, as real backends)."""
    from searchgym.agents import registry
    from searchgym.registry import POLICIES, Spec

    policy = ScriptedSimulatorPolicy()
    monkeypatch.setitem(POLICIES._specs, "scripted", Spec("scripted", lambda model, seed: policy))
    registry.load_policy.cache_clear()
    yield policy
    registry.load_policy.cache_clear()
