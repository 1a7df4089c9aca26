"""Fine-tune a small model into a search simulator for `Simulated` (ZeroSearch's SFT recipe).

    python data_scripts/sft_simulator.py --world-passages 2000 --out runs/simulator --steps 50
    python data_scripts/sft_simulator.py --corpus corpus.jsonl --queries 500 --out runs/simulator
    python data_scripts/sft_simulator.py --model DIR --world-passages 300 --out OUT --steps 2 --no-progress

Queries come from the generated world (every hop's query of the train questions, shown to the
simulator with the question and gold answer) or, with ``--corpus``, from passage titles (query
alone). Useful targets are BM25's top ``--k`` passages, noisy ones passages retrieved for other
queries (see `searchgym.agents.train.sft_simulator`). The training rows are written to
``OUT/sft_examples.jsonl`` for inspection; the model and tokenizer to ``OUT``, which
``HFPolicy(OUT)`` loads and ``Simulated`` uses as its generator.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from searchgym.agents.policies.models import DEFAULT_MODEL
from searchgym.agents.train.sft_simulator import (
    SimulatorSFTConfig,
    corpus_queries,
    simulator_examples,
    train_simulator,
    world_queries,
)
from searchgym.errors import SearchGymError
from searchgym.retrievers import BM25, Doc, read_corpus
from searchgym.tasks.world import load_world


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model to start from (default %(default)s)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", type=Path, help="a JSONL corpus; queries are its passage titles")
    source.add_argument(
        "--world-passages", type=int, metavar="N", help="use the generated world with N passages"
    )
    parser.add_argument("--world-seed", type=int, default=0, help="seed of the world (default 0)")
    parser.add_argument("--queries", type=int, default=1000, help="most queries to use (default 1000)")
    parser.add_argument("--k", type=int, default=5, help="documents per target (default 5, as ZeroSearch)")
    parser.add_argument("--out", type=Path, required=True, help="directory for the fine-tuned model")
    parser.add_argument("--steps", type=int, default=50, help="optimizer steps (default 50)")
    parser.add_argument("--batch-size", type=int, default=4, help="examples per step (default 4)")
    parser.add_argument("--lr", type=float, default=5e-5, help="learning rate (default 5e-5)")
    parser.add_argument("--max-length", type=int, default=1536, help="longest example in tokens")
    parser.add_argument("--seed", type=int, default=0, help="seed of sampling and data order")
    parser.add_argument("--no-progress", action="store_true", help="turn off the progress bars")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cfg = SimulatorSFTConfig(
            out=args.out.expanduser(),
            model=args.model,
            steps=args.steps,
            batch_size=args.batch_size,
            learning_rate=args.lr,
            max_length=args.max_length,
            seed=args.seed,
            show_progress=not args.no_progress,
        )
        if args.corpus is not None:
            docs = list(read_corpus(args.corpus.expanduser()))
            queries = corpus_queries(docs, args.queries, seed=args.seed)
        else:
            world = load_world(seed=args.world_seed, n_passages=args.world_passages)
            docs = [Doc(p["id"], p["title"], p["text"]) for p in world.passages]
            queries = world_queries(world, "train")[: args.queries]
        retriever = BM25.build(docs, show_progress=not args.no_progress)
        rows = simulator_examples(queries, retriever, k=args.k, seed=args.seed)
        cfg.out.mkdir(parents=True, exist_ok=True)
        with (cfg.out / "sft_examples.jsonl").open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        result = train_simulator(rows, cfg)
    except SearchGymError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    noisy = sum(r["mode"] == "noisy" for r in rows)
    first, last = (result.losses[0], result.losses[-1]) if result.losses else (float("nan"),) * 2
    print(
        f"trained {args.steps} steps on {len(rows)} examples ({noisy} noisy) from {len(queries)} queries; "
        f"loss {first:.3f} -> {last:.3f}; saved to {result.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
