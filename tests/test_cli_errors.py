"""Every bad input to the CLI exits 2 with one line on stderr that says what was wrong and how to
fix it, and no traceback (``--debug`` shows one). Run in-process: ``searchgym.cli.main``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from searchgym.cli import main
from searchgym.retrievers import BM25, Doc

SMALL = ["-E", "n_passages=300"]
EVAL = ["eval", "--agent", "oracle", "--n", "2", "--no-progress"]
UNWRITABLE = "/sys/searchgym-test"  # read-only even for root


def corpus_rows(rows: list) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


FILES: dict[str, bytes] = {
    "malformed.yaml": b"steps: [1, 2\n",
    "latin1.yaml": "steps: 3  # caf\u00e9\n".encode("latin-1"),
    "list.yaml": b"- steps\n- 3\n",
    "badtype.yaml": b"steps: abc\n",
    "unknown.yaml": b"stepz: 3\n",
    "empty.jsonl": b"",
    "blank.jsonl": b"\n\n",
    "latin1.jsonl": '{"id": "a", "title": "caf\u00e9", "text": "x"}\n'.encode("latin-1"),
    "nested.jsonl": b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "nested-object.jsonl": b'{"id": "a", "text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
    "hugeint.jsonl": b'{"id": ' + b"9" * 5000 + b', "text": "x"}\n',
    "notjson.jsonl": b"{id: a}\n",
    "array.jsonl": b"[1, 2]\n",
    "noid.jsonl": corpus_rows([{"title": "t", "text": "x"}]),
    "notext.jsonl": corpus_rows([{"id": "a", "title": "t"}]),
    "dupids.jsonl": corpus_rows(
        [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}, {"id": "a", "text": "z"}]
    ),
    "nullid.jsonl": corpus_rows([{"id": None, "text": "x"}]),
    "emptyid.jsonl": corpus_rows([{"id": " ", "text": "x"}]),
    "listid.jsonl": corpus_rows([{"id": [1], "text": "x"}]),
    "good.jsonl": corpus_rows([{"id": "a", "title": "Paris", "text": "capital of France"}]),
    "a-file": b"x",
    "dup.yaml": b"steps: 1\nlr: 1.0e-5\nsteps: 2\n",
    "deep.yaml": b"env_kwargs: " + b"[" * 1000 + b"]" * 1000 + b"\n",
    "big.yaml": b"# " + b"x" * 1_000_000 + b"\n",
    "bomb.yaml": b"a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
    + b"".join(b"%c: &%c [" % (c, c) + b", ".join([b"*%c" % (c - 1)] * 10) + b"]\n" for c in b"bcdef"),
    # user modules, importable while the table runs (the folder is put on sys.path)
    "sg_user.py": (
        b"NOT_CALLABLE = [1, 2]\n\n\ndef raising(**kwargs):\n    raise RuntimeError('no index in ./data')\n"
    ),
    "sg_exits.py": b"import sys\n\nsys.exit(3)\n",
    "sg_raises.py": b"raise ValueError('broken at import')\n",
    "sg_missing_dep.py": b"import sg_no_such_dependency\n",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("bad-input")
    for name, data in FILES.items():
        (root / name).write_bytes(data)
    (root / "not-an-index").mkdir()
    (root / "not-an-index" / "notes.txt").write_text("mine")
    (root / "no-metrics").mkdir()
    run = root / "finished-run" / "checkpoints" / "step-000010"
    run.mkdir(parents=True)
    (run / "state.json").write_text("{}")
    BM25.build([Doc("a", "Paris", "capital")]).save(root / "broken-index")
    (root / "broken-index" / "docs.jsonl").write_text("")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))  # the sg_* modules
        yield root


# (argv, pattern of the one stderr line); {d} is the folder of FILES
CASES: list[tuple[list[str], str]] = [
    # -- the parser
    ([], "the following arguments are required: command"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["eval", "--n", "abc"], "argument --n: invalid int value: 'abc'"),
    (["eval", "--seed", "x"], "argument --seed: invalid int value"),
    (["eval", "--temperature", "hot"], "argument --temperature: invalid float value"),
    (["eval", "--n-envs", "0"], r"argument --n-envs: must be at least 1, got 0"),
    (["eval", "--bogus"], "unrecognized arguments: --bogus"),
    (["eval", "-E", "novalue"], "expected KEY=VALUE, got 'novalue'"),
    (["eval", "-E", "hops=[1, 2"], "the value of hops is not valid YAML"),
    (
        ["serve", "--index", "{d}/x", "--port", "99999"],
        r"argument --port: must be from 0 to 65535, got 99999",
    ),
    (["serve", "--index", "{d}/x", "--port", "-1"], r"argument --port: must be from 0 to 65535"),
    (["serve", "--index", "{d}/x", "--port", "http"], "argument --port: expected an integer, got 'http'"),
    (["serve", "--index", "{d}/x", "--topk", "0"], "argument --topk: must be at least 1"),
    (["serve", "--index", "{d}/x", "--max-results", "0"], "argument --max-results: must be at least 1"),
    (["serve", "--index", "{d}/x", "--max-body-mb", "nan"], "--max-body-mb: must be from 0.001 to 1024"),
    (["serve", "--index", "{d}/x", "--batch-wait-ms", "1e9"], "--batch-wait-ms: must be from 0 to 1000"),
    (["serve", "--index", "{d}/x", "--read-timeout", "0"], r"--read-timeout: must be from 0\.1 to 3600"),
    (["serve", "--index", "{d}/x", "--max-query-chars", "0"], "--max-query-chars: must be at least 1"),
    (["serve", "--index", "{d}/x", "--max-batch-chars", "0"], "--max-batch-chars: must be at least 1"),
    (["serve", "--index", "{d}/x", "--allowed-hosts", "a:80"], "--allowed-hosts: expected host names"),
    (["serve"], "the following arguments are required: --index"),
    (["serve-env", "--max-sessions", "0"], "argument --max-sessions: must be at least 1"),
    (["serve-env", "--idle-timeout", "0"], "argument --idle-timeout: must be at least 1"),
    (["serve-env", "--max-message-kb", "0"], "argument --max-message-kb: must be at least 1"),
    (["serve-env", "--port", "70000"], r"argument --port: must be from 0 to 65535"),
    (["serve-env", "nope/X-v0"], "no environment 'nope/X-v0' is registered"),
    (["serve-env", "-E", "protocol=xml"], "unknown action protocol 'xml'. Known: tags, tool_calls"),
    (["serve-env", "--allowed-hosts", "a:80"], "--allowed-hosts: expected host names"),
    (
        ["serve-env", "--allowed-origins", "evil.example"],
        "--allowed-origins: expected origins such as https://",
    ),
    (
        ["index", "build", "--corpus", "{d}/good.jsonl", "--kind", "faiss", "--out", "{d}/o"],
        "unknown retriever kind .faiss.. Known: bm25",
    ),
    (
        ["index", "build", "--corpus", "{d}/good.jsonl", "--kind", "rerank", "--out", "{d}/o"],
        r"a 'rerank' retriever cannot be saved as an index.*\(bm25, dense, lucene\)",
    ),
    (["index", "build", "--out", "{d}/o"], "required: --corpus"),
    (["index"], "required: index_command"),
    (["sweep"], "required: --weights"),
    (["plot"], "required: RUN_DIR"),
    # -- eval
    (EVAL[:-2] + ["0"], "--n must be at least 1, got 0"),
    (EVAL + ["--env", "searchgym/Nope-v0"], "no environment 'searchgym/Nope-v0' is registered"),
    (EVAL + ["--agent", "oracel"], "unknown agent 'oracel'. Did you mean 'oracle'"),
    (
        EVAL + SMALL + ["-E", "protocol=tool_call"],
        r"unknown action protocol 'tool_call'. Did you mean 'tool_calls'\? Known: tags, tool_calls",
    ),
    (EVAL + SMALL + ["-E", "top_k=-1"], "top_k must be an integer >= 1, got -1"),
    (EVAL + SMALL + ["-E", "top_k=abc"], "top_k must be an integer >= 1, got 'abc'"),
    (EVAL + SMALL + ["-E", "max_turns=0"], "max_turns must be an integer >= 1, got 0"),
    (EVAL + SMALL + ["-E", "max_obs_tokens=0"], "max_obs_tokens must be an integer >= 1"),
    (EVAL + SMALL + ["-E", "top_kk=2"], r"unknown env option\(s\) \['top_kk'\]"),
    (EVAL + SMALL + ["-E", "split=nope"], "unknown split 'nope'; choose one of train, dev, test"),
    (EVAL + SMALL + ["-E", "hops=9"], "hops must be whole numbers from 1 to 4"),
    (EVAL + ["-E", "n_passages=-5"], "n_passages must be between 300 and 500,000"),
    (EVAL + SMALL + ["-E", "rewards={per_serch: 1}"], r"unknown reward weight\(s\) \['per_serch'\]"),
    (EVAL + SMALL + ["-E", "rewards={outcome: x}"], "outcome must be a number, got 'x'"),
    (EVAL + SMALL + ["-E", "rewards={per_search: -1}"], "per_search is a cost and must be >= 0"),
    (EVAL + SMALL + ["--simulator", "nocolon"], "--simulator takes BACKEND:MODEL"),
    (EVAL + SMALL + ["--simulator", "hf:x"], "takes no generator"),
    (EVAL + SMALL + ["--out", "{d}/a-file"], r"--out .*a-file: .*a-file is a file, not a directory"),
    (EVAL + SMALL + ["--out", "{d}/a-file/sub"], r"a-file is a file, not a directory; choose another path"),
    (
        EVAL + SMALL + ["--out", UNWRITABLE],
        r"--out /sys/searchgym-test: cannot write in /sys \(Permission denied\)",
    ),
    # -- train
    (["train", "--config", "{d}/missing.yaml"], "config file .*missing.yaml does not exist"),
    (["train", "--config", "{d}/malformed.yaml"], r"malformed.yaml is not valid YAML: .*line 2"),
    (
        ["train", "--config", "{d}/latin1.yaml"],
        r"latin1.yaml is not UTF-8 text \(byte \d+\); save it as UTF-8",
    ),
    (["train", "--config", "{d}/list.yaml"], "must hold a mapping of config keys, got list"),
    (["train", "--config", "{d}/badtype.yaml"], r"steps must be an integer, got 'abc' \(a str\)"),
    (["train", "--config", "{d}/unknown.yaml"], r"unknown config key\(s\): stepz \(did you mean steps\?\)"),
    (["train", "--config", "{d}"], r"cannot read .* \(Is a directory\)"),
    (["train", "--set", "steps"], "overrides look like key=value, got 'steps'"),
    (["train", "--set", "steps=abc"], "steps must be an integer, got 'abc'"),
    (["train", "--set", "steps=[1"], r"--set steps: '\[1' is not valid YAML"),
    (["train", "--set", "steps=-1"], "steps must be >= 0, got -1"),
    (["train", "--set", "seed=1.5"], "seed must be an integer, got 1.5"),
    (["train", "--set", "lr=fast"], "lr must be a number, got 'fast'"),
    (["train", "--set", "lr=3e-5"], "YAML reads a number in e-notation without a dot as text: write 3.0e-5"),
    (["train", "--set", "bf16=maybe"], "bf16 must be true or false or one of 'auto' or None, got 'maybe'"),
    (["train", "--set", "env_kwargs=3"], "env_kwargs must be a mapping, got 3"),
    (["train", "--set", "group_size=1"], "group_size must be >= 2"),
    (["train", "--set", "advantage=ppo"], "advantage must be one of 'grpo', 'dr_grpo', 'stratified', 'igpo'"),
    (["train", "--set", "temperature=0"], "temperature must be > 0"),
    (["train", "--set", "rewards={outcome: x}"], "outcome must be a number, got 'x'"),
    (
        ["train", "--set", "rewards={outcome_metric: bleu}"],
        "outcome_metric must be one of 'em', 'f1', 'cover_em'",
    ),
    (["train", "--set", "rewards={per_serch: 0.1}"], r"unknown reward weight\(s\) \['per_serch'\]"),
    (["train", "--set", "warm_start_agent=nope"], "unknown agent .nope.. Known: oracle"),
    (["train", "--run-dir", "{d}/a-file"], r"--run-dir .*a-file is a file, not a directory"),
    (["train", "--run-dir", UNWRITABLE], r"--run-dir /sys/searchgym-test: cannot write in /sys"),
    (["train", "--run-dir", "{d}/no-run", "--resume"], "holds no checkpoint to resume from; drop --resume"),
    (
        ["train", "--run-dir", "{d}/finished-run"],
        r"already holds a run \(checkpoints up to step 10\): add --resume",
    ),
    (["train", "--run-dir", "{d}/finished-run", "--resume", "--overwrite"], "give one of them"),
    # -- index build
    (
        ["index", "build", "--corpus", "{d}/missing.jsonl", "--out", "{d}/o"],
        "corpus file .*missing.jsonl does not exist",
    ),
    (["index", "build", "--corpus", "{d}/empty.jsonl", "--out", "{d}/o"], "empty.jsonl is an empty corpus"),
    (["index", "build", "--corpus", "{d}/blank.jsonl", "--out", "{d}/o"], "blank.jsonl is an empty corpus"),
    (["index", "build", "--corpus", "{d}/latin1.jsonl", "--out", "{d}/o"], r"latin1.jsonl:1: not UTF-8 text"),
    (
        ["index", "build", "--corpus", "{d}/nested.jsonl", "--out", "{d}/o"],
        "nested.jsonl:1: the JSON is nested too deeply",
    ),
    (
        ["index", "build", "--corpus", "{d}/nested-object.jsonl", "--out", "{d}/o"],
        "nested-object.jsonl:1: .*nested too",
    ),
    (
        ["index", "build", "--corpus", "{d}/hugeint.jsonl", "--out", "{d}/o"],
        r"hugeint.jsonl:1: Exceeds the limit \(4300",
    ),
    (
        ["index", "build", "--corpus", "{d}/notjson.jsonl", "--out", "{d}/o"],
        r"notjson.jsonl:1: not valid JSON",
    ),
    (
        ["index", "build", "--corpus", "{d}/array.jsonl", "--out", "{d}/o"],
        "array.jsonl:1: expected a JSON object, got list",
    ),
    (
        ["index", "build", "--corpus", "{d}/noid.jsonl", "--out", "{d}/o"],
        "noid.jsonl:1: corpus row has no 'id' field",
    ),
    (
        ["index", "build", "--corpus", "{d}/notext.jsonl", "--out", "{d}/o"],
        "has neither 'text' nor 'contents'",
    ),
    (
        ["index", "build", "--corpus", "{d}/dupids.jsonl", "--out", "{d}/o"],
        "dupids.jsonl:3: id 'a' is already on line 1",
    ),
    (
        ["index", "build", "--corpus", "{d}/nullid.jsonl", "--out", "{d}/o"],
        "nullid.jsonl:1: corpus row has id None",
    ),
    (
        ["index", "build", "--corpus", "{d}/emptyid.jsonl", "--out", "{d}/o"],
        "emptyid.jsonl:1: .*non-empty strings",
    ),
    (
        ["index", "build", "--corpus", "{d}/listid.jsonl", "--out", "{d}/o"],
        r"listid.jsonl:1: corpus row has id \[1\]",
    ),
    (
        ["index", "build", "--corpus", "{d}/good.jsonl", "--out", "{d}/a-file"],
        "a-file is a file, not a directory",
    ),
    (
        ["index", "build", "--corpus", "{d}/good.jsonl", "--out", "{d}/not-an-index"],
        "holds files and no searchgym index",
    ),
    (["index", "build", "--corpus", "{d}/good.jsonl", "--out", UNWRITABLE], "cannot write in /sys"),
    (
        ["index", "build", "--corpus", "{d}/good.jsonl", "--out", "{d}/o", "--shard-size", "5"],
        "only apply to --kind dense",
    ),
    # -- serve, plot, sweep
    (
        ["serve", "--index", "{d}/missing-index"],
        "holds no complete searchgym index .*; build one with searchgym index",
    ),
    (["serve", "--index", "{d}/broken-index"], r"incomplete or altered index \(docs.jsonl is 0 bytes"),
    (["serve", "--index", "{d}/not-an-index"], "holds no complete searchgym index"),
    (["plot", "{d}/no-metrics"], "no metrics.jsonl in .*no-metrics: is it the --run-dir"),
    (["sweep", "--weights", "a,b"], "weights"),
    (
        ["sweep", "--weights", "0", "--set", "steps=1"],
        "--set overrides keys of a training config: use it with --config",
    ),
    (["sweep", "--weights", "0", "--out", "{d}/a-file"], "a-file is a file, not a directory"),
]

FRESH = ["--run-dir", "{d}/fresh-run"]
# every config value is checked when the config loads, before any model or env (issue 36)
CASES += [
    (["train", "--set", "weight_decay=-5"], "weight_decay must be >= 0, got -5"),
    (["train", "--set", "seed=-1"], r"seed must be from 0 to 2\*\*32 - 1, got -1"),
    (["train", "--set", "max_grad_norm=-1"], "max_grad_norm must be > 0"),
    (["train", "--set", "lr=0"], "lr must be > 0, got 0"),
    (["train", "--set", "lr=.inf"], "lr must be > 0, got inf"),
    (["train", "--set", "warm_start_lr=-1"], "warm_start_lr must be > 0"),
    (["train", "--set", "top_p=0"], r"top_p must be in \(0, 1\], got 0"),
    (["train", "--set", "clip_low=1"], r"clip_low must be in \[0, 1\), got 1"),
    (["train", "--set", "micro_batch_size=0"], "micro_batch_size must be >= 1, got 0"),
    (["train", "--set", "max_refill_seconds=-1"], r"max_refill_seconds must be >= 0 \(or null"),
    (["train", "--set", "model=' '"], "model must not be empty"),
    (["train", "--set", "env=nope/X-v0"], r"no environment 'nope/X-v0' is registered\. `searchgym list`"),
    (
        ["train", "--set", "env=searchgym/FictionalQA-BM25-v1"],
        "Did you mean 'searchgym/FictionalQA-BM25-v0'",
    ),
    (["train", "--set", "env=CartPole-v1"], "CartPole-v1 takes no 'split'"),
    (["train", "--set", "env_kwargs={split: test}"], "env_kwargs: split is set by the config key"),
    (
        ["train", "--set", "eval_env_kwargs={max_turns: 2}"],
        "eval_env_kwargs: max_turns is set by the config key",
    ),
    (["train", "--set", "eval_env_kwargs={hop: [2]}"], r"unknown env option\(s\) \['hop'\]"),
    (["train", "--set", "policy=nope"], "unknown policy backend 'nope'"),
    (["train", "--set", "policy=sg_user:NOT_CALLABLE"], "'sg_user:NOT_CALLABLE' is a list, not a class"),
    (["train", "--set", "warm_start_agent=sg_user:NOT_CALLABLE"], "is a list, not a class or function"),
    (
        ["train", *FRESH, "--set", "warm_start_episodes=2", "--set", "warm_start_agent=sg_user:raising"],
        "warm_start_agent sg_user:raising raised RuntimeError: no index in ./data",
    ),
    (["train", *FRESH, "--set", "guide=sg_user:raising"], "guide sg_user:raising raised RuntimeError"),
    (["train", "--set", "rewards={outcome: 1, outcome: 2}"], "--set rewards: duplicate key 'outcome'"),
    (["train", "--config", "{d}/dup.yaml"], r"dup.yaml:3: duplicate key 'steps' \(first on line 1\)"),
    (["train", "--config", "{d}/deep.yaml"], "deep.yaml:1: nested deeper than 32 levels"),
    (["train", "--config", "{d}/big.yaml"], "big.yaml is larger than 1,000,000 bytes"),
    (["train", "--config", "{d}/bomb.yaml"], "bomb.yaml:5: holds more than 100,000 values once its aliases"),
    (["sweep", "--weights", "0", "--config", "{d}/dup.yaml"], "dup.yaml:3: duplicate key 'steps'"),
    (EVAL + ["-E", "hops={a: 1, a: 2}"], "the value of hops: duplicate key 'a'"),
    (EVAL + ["--env", "nope/X-v0"], r"no environment 'nope/X-v0' is registered\. `searchgym list`"),
    (EVAL + ["--agent", "sg_user:NOT_CALLABLE"], "'sg_user:NOT_CALLABLE' is a list, not a class"),
    (EVAL + ["--agent", "sg_user:raising"], "--agent sg_user:raising raised RuntimeError: no index"),
    (
        ["sweep", "--weights", "0", "--agents", "sg_user:raising", "--no-progress"],
        "--agents sg_user:raising raised RuntimeError",
    ),
    (
        ["index", "build", "--corpus", "{d}/good.jsonl", "--out", "{d}/o", "--kind", "sg_user:NOT_CALLABLE"],
        "'sg_user:NOT_CALLABLE' is a list, not a class",
    ),
    # --import: a module name, never a path; a module that fails to import is named
    (EVAL + ["--import", "../etc"], r"--import \.\./etc: not a module name"),
    (EVAL + ["--import", "sg_user.py"], "write --import sg_user"),
    (EVAL + ["--import", "sg_exits"], r"--import sg_exits: importing it raised sys.exit\(3\)"),
    (EVAL + ["--import", "sg_raises"], "--import sg_raises: importing it raised ValueError: broken at"),
    (EVAL + ["--import", "sg_missing_dep"], "No module named 'sg_no_such_dependency'"),
]

# view: the port and the export file are checked before any run is read (issue 43)
CASES += [
    (["view", "{d}", "--port", "99999"], r"argument --port: must be from 0 to 65535, got 99999"),
    (["view", "{d}", "--port", "-5"], r"argument --port: must be from 0 to 65535, got -5"),
    (["view", "{d}", "--export-max", "-5"], "argument --export-max: must be at least 0, got -5"),
    (["view", "{d}", "--export", "/dev/null/x.html"], "--export /dev/null: /dev/null is a file, not a dir"),
    (["view", "{d}", "--export", "{d}/a-file/x.html"], "a-file is a file, not a directory"),
    (["view", "{d}", "--export", UNWRITABLE + "/x.html"], r"--export /sys/searchgym-test: cannot write in"),
    (["view", "{d}", "--export", "{d}"], r"--export .* is a directory; name the file to write, such as"),
]


@pytest.mark.parametrize(("argv", "pattern"), CASES, ids=[" ".join(a)[:70] for a, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_no_traceback(argv, pattern, files, capsys):
    argv = [a.replace("{d}", str(files)) for a in argv]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert re.search(pattern, err), err


def test_the_table_covers_at_least_60_cases():
    assert len(CASES) >= 60


def test_debug_shows_the_traceback(files):
    with pytest.raises(Exception, match="top_k must be an integer >= 1"):
        main(["--debug", *EVAL, *SMALL, "-E", "top_k=-1"])


def test_ctrl_c_ends_any_command_in_one_line_with_status_130(files, capsys, monkeypatch):
    from searchgym.commands import index

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(index, "build_index", interrupted)
    argv = ["index", "build", "--corpus", f"{files}/good.jsonl", "--out", f"{files}/interrupted"]
    assert main(argv) == 130
    assert capsys.readouterr().err == "searchgym: interrupted\n"
    with pytest.raises(KeyboardInterrupt):  # --debug shows where it was
        main(["--debug", *argv])
