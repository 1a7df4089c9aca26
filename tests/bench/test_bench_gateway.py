"""bench/gateway.py plays the same programs directly and through the gateway, on a tiny random
Llama: a ratio per count of programs, the same token ids both ways, and batches of several
requests where several programs run at once."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_gateway", ROOT / "bench" / "gateway.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_each_count_gets_a_ratio_the_same_tokens_and_batches(tiny_llama_dir, tmp_path, capsys):
    argv = ["--model", str(tiny_llama_dir), "--programs", "1,4", "--turns", "2", "--max-tokens", "4"]
    results = load_bench().main([*argv, "--repeats", "2", "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out

    assert json.loads((tmp_path / "results.json").read_text()) == results
    assert (tmp_path / "gateway.png").stat().st_size > 0
    one, four = results["rows"]
    assert (one["programs"], four["programs"]) == (1, 4)
    for row in (one, four):
        assert row["ratio"] > 0 and math.isfinite(row["ratio"]) and len(row["ratios"]) == 2
        assert row["ids_match"] == row["programs"] and not row["mismatched_programs"]
        assert all(tokens > 0 for tokens in row["tokens"])
        # one printed row per count: programs, direct, gateway, the ratio, ..., ids equal
        lines = [line.split() for line in out.splitlines()]
        printed = next(words for words in lines if words[:1] == [str(row["programs"])])
        assert float(printed[3]) == pytest.approx(row["ratio"], abs=1e-3)
        assert f"{row['programs']}/{row['programs']}" in printed
    assert results["ids_match"] and results["target_met"] is None  # no count of 8 or more
    assert one["batches"] == [[1, 1], [1, 1]]  # one program: every call a batch of one, one a turn
    sizes = [size for run in four["batches"] for size in run]
    assert sum(sizes) == 2 * 2 * 4 and max(sizes) > 1  # 2 repeats x 2 turns x 4 programs, batched
