"""bench/grpo_parity.py: the same configuration trained twice gives the same digests (training is
deterministic for a seed, which is what makes the bench's comparison across commits meaningful),
and different configurations give different weights."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_configuration_trains_to_the_same_digests_twice(tiny_llama_dir, tmp_path):
    digests = []
    for out in ("a", "b"):
        command = [sys.executable, str(ROOT / "bench" / "grpo_parity.py"), "--model", str(tiny_llama_dir)]
        command += ["--out", str(tmp_path / out), "--only", "igpo", "dynamic"]
        run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout.splitlines()[1].startswith("igpo")  # the configurations as asked
        digests.append(json.loads((tmp_path / out / "digests.json").read_text()))
    assert digests[0] == digests[1]
    assert digests[0]["igpo"]["weights"] != digests[0]["dynamic"]["weights"]
