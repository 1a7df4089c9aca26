"""Converting an offline model (a GGUF file inside a wheel) shows its steps on stderr, or prints
nothing; ``searchgym eval`` converts the models it will load first, passing its --no-progress."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from searchgym.agents.policies import models
from searchgym.agents.policies.models import CONVERSION_STEPS, WheelModel, convert_wheel_model
from searchgym.commands import eval as eval_command

gguf = pytest.importorskip("gguf")

TINY = WheelModel("tiny-model", "tiny_model/Tiny-Llama.F32.gguf")


def write_tiny_gguf(path) -> None:
    """A one-layer, 8-wide Llama with a 98-token byte-level BPE vocabulary, as float32 tensors."""
    hidden, ff, heads, kv_heads = 8, 16, 2, 1
    tokens = [chr(c) for c in range(33, 127)] + ["Ġ", "Ġt", "<|endoftext|>"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_context_length(64)
    writer.add_embedding_length(hidden)
    writer.add_block_count(1)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (len(tokens) - 1) + [3])
    writer.add_token_merges(["Ġ t"])
    writer.add_bos_token_id(len(tokens) - 1)
    writer.add_eos_token_id(len(tokens) - 1)
    rng = np.random.default_rng(0)
    kv = hidden // heads * kv_heads
    shapes = {
        "token_embd.weight": (len(tokens), hidden),
        "blk.0.attn_norm.weight": (hidden,),
        "blk.0.attn_q.weight": (hidden, hidden),
        "blk.0.attn_k.weight": (kv, hidden),
        "blk.0.attn_v.weight": (kv, hidden),
        "blk.0.attn_output.weight": (hidden, hidden),
        "blk.0.ffn_norm.weight": (hidden,),
        "blk.0.ffn_gate.weight": (ff, hidden),
        "blk.0.ffn_up.weight": (ff, hidden),
        "blk.0.ffn_down.weight": (hidden, ff),
        "output_norm.weight": (hidden,),
    }
    for name, shape in shapes.items():
        writer.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def tiny_wheel(tmp_path_factory):
    """A wheel holding the tiny GGUF file where `TINY` says."""
    folder = tmp_path_factory.mktemp("tiny-wheel")
    write_tiny_gguf(folder / "tiny.gguf")
    wheel = folder / "tiny_model-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(folder / "tiny.gguf", TINY.gguf)
    return wheel


@pytest.fixture
def tiny_source(tiny_wheel, monkeypatch):
    monkeypatch.setenv(TINY.wheel_env, str(tiny_wheel))
    return TINY


def test_the_conversion_names_what_it_converts_and_each_step(tmp_path, tiny_source, capfd):
    target = tmp_path / "models" / "tiny"
    convert_wheel_model(tiny_source, target, show_progress=True)
    out, err = capfd.readouterr()
    assert out == ""
    title = f"converting Tiny-Llama from the tiny-model wheel into {target} (once; later runs load that copy)"
    assert err.splitlines()[0] == title
    for step in CONVERSION_STEPS:
        assert f"{step}]" in err  # the bar's postfix as each step starts
    assert "6/6" in err and "done]" in err
    assert (target / "config.json").is_file() and (target / "model.safetensors").is_file()


def test_without_progress_the_conversion_prints_nothing(tmp_path, tiny_source, capfd):
    """Transformers' own bars (dequantising the tensors, writing the shards) are hidden too."""
    target = tmp_path / "tiny"
    convert_wheel_model(tiny_source, target, show_progress=False)
    assert capfd.readouterr() == ("", "")
    assert (target / "config.json").is_file()


def test_a_target_under_home_is_shown_with_a_tilde(tmp_path, tiny_source, capfd, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    convert_wheel_model(tiny_source, tmp_path / ".cache" / "tiny", show_progress=True)
    assert " into ~/.cache/tiny (once" in capfd.readouterr().err


@pytest.mark.parametrize("no_progress", [False, True])
def test_eval_converts_the_local_aliases_first_with_its_progress_flag(monkeypatch, no_progress):
    converted = []

    def resolve(name, *, show_progress):
        converted.append((name, show_progress))

    monkeypatch.setattr(models, "resolve_model", resolve)
    names = ["oracle", "hf:SmolLM2-135M-Instruct", "cpu:smollm2-135m-instruct"]
    names += ["openai:smollm2-135m-instruct", "hf:Qwen/Qwen2.5-0.5B-Instruct"]
    eval_command._convert_models(names, show_progress=not no_progress)
    assert converted == [
        ("SmolLM2-135M-Instruct", not no_progress),
        ("smollm2-135m-instruct", not no_progress),
    ]  # not the server's model (openai:), nor a hub id
