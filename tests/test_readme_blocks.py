"""Every code block of the README runs as a new user would run it: verbatim, from a fresh directory,
or with its sizes scaled down the way the README says. `test_every_readme_block_has_a_test` fails
on a block that no test covers, so a new block comes with its test."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
import tomllib
from test_readme import ROOT, readme_block

BIN = Path(sys.executable).parent
OWN = "Your own env, agent and reward"
# What tests a block: (README section, language, index in the section) -> the test's name.
BLOCKS = {
    ("searchgym", "bash", 0): "test_readme.py::test_two_commands_with_the_same_setup_as_ci",  # and CI
    ("searchgym", "bash", 1): "test_the_laptop_install_is_the_main_install_from_pytorchs_cpu_index",
    ("Use it", "python", 0): "test_readme.py::test_usage_example_runs_and_prints_what_the_readme_says",
    ("Use it", "bash", 0): "test_the_eval_commands_run_as_written",
    ("Use it", "bash", 1): "test_the_language_model_agents_run_as_written",
    ("Train", "bash", 0): "test_the_train_commands_run_shortened",
    ("Train", "bash", 1): "test_the_reward_study_runs_shortened_and_continues_where_it_stopped",
    ("See what the agent did", "bash", 0): "test_the_viewer_serves_what_eval_wrote",
    (OWN, "python", 0): "test_readme.py::test_your_own_env_agent_and_reward_run_as_written",
    (OWN, "bash", 0): "test_readme.py::test_your_own_env_agent_and_reward_run_as_written",
    (OWN, "toml", 0): "test_the_plugin_entry_point_names_the_group_searchgym_loads",
    ("Data", "python", 0): "test_the_data_example_reads_local_benchmarks",
    ("Data", "bash", 0): "test_the_data_scripts_fail_fast_offline_and_the_index_builds",
    ("Indexes and the retrieval server", "bash", 0): "test_the_index_builds_and_the_server_run_as_written",
    ("The web and the planner", "python", 0): "test_the_live_web_env_builds_as_written",
    ("The web and the planner", "bash", 0): "test_the_sweeps_run_shortened",
}
# The shortening the README names for its train commands (`--set KEY=VALUE`, `--set model=PATH`)
SHORT = (
    "--set steps=1 --set warm_start_episodes=4 --set eval_tasks=4 --set tasks_per_step=2 --set group_size=2"
)
# and for the reward study (its own flags for steps and dev tasks, then the same `--set`)
STUDY_SHORT = "--steps 1 --eval-tasks 4 --set tasks_per_step=2 --set group_size=2"
# with the tiny random model, which has 2 decoder blocks, not the 15 the quickstart trains
TINY = "--set trainable_layers=0"


def readme_blocks() -> list[tuple[str, str, int]]:
    """(section, language, index) of every fenced code block of the README."""
    sections = (ROOT / "README.md").read_text().split("\n## ")
    found = []
    for section in sections:
        heading = section.split("\n", 1)[0].removeprefix("# ")
        languages = re.findall(r"^ *```(\w+)\n", section, re.M)
        found += [(heading, lang, languages[:i].count(lang)) for i, lang in enumerate(languages)]
    return found


def test_the_readme_names_the_shortening_the_tests_use():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert SHORT in readme and STUDY_SHORT in readme and TINY in readme


def test_every_readme_block_has_a_test():
    assert sorted(readme_blocks()) == sorted(BLOCKS)
    here = sys.modules[__name__]
    for test in BLOCKS.values():
        module, _, name = test.rpartition("::")
        assert callable(getattr(sys.modules[module.removesuffix(".py")] if module else here, name)), test


def environ(**env: str) -> dict[str, str]:
    """This process's environment with this venv's commands first on the PATH, and ``env``."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONUNBUFFERED": "1", **env}


def bash(script: str, cwd: Path, timeout: float = 900, **env: str) -> subprocess.CompletedProcess:
    """``script`` run by bash from ``cwd``; it must succeed."""
    result = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=cwd, env=environ(**env),
                            capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert result.returncode == 0, f"{script}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def serve(command: str, cwd: Path, url: str, **env: str) -> subprocess.Popen:
    """Start a server command and wait until ``url`` answers."""
    # a session of its own, so that `stop` stops the server with the shell that started it
    server = subprocess.Popen(command, shell=True, cwd=cwd, env=environ(**env), stderr=subprocess.PIPE,
                              text=True, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read()[-3000:]
        try:
            urllib.request.urlopen(url, timeout=2)
            return server
        except OSError:
            time.sleep(0.5)
    stop(server)
    raise AssertionError(f"{command} did not answer at {url} within 120 s")


def stop(server: subprocess.Popen) -> None:
    """Stop the server and the shell that started it."""
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(10)


def copy_configs(cwd: Path) -> None:
    shutil.copytree(ROOT / "configs", cwd / "configs")


def test_the_laptop_install_is_the_main_install_from_pytorchs_cpu_index():
    """Not run here (download.pytorch.org is out of reach): the same torch and extras as the main
    install, with torch from PyTorch's CPU index first."""
    top = (ROOT / "README.md").read_text().split("\n## ")[0]
    main, laptop = re.findall(r"```bash\n(.*?)```", top, re.S)
    venv, torch, rest = (line.split("#")[0].strip() for line in laptop.strip().splitlines())
    assert venv in main
    assert torch == "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    assert f"pip install torch==2.13.0 {rest.removeprefix('pip install ')}" in main


@pytest.mark.slow
def test_the_eval_commands_run_as_written(tmp_path):
    out = bash(readme_block("Use it", "bash"), tmp_path).stdout
    assert "searchgym/FictionalQA-BM25-v0" in out
    report = json.loads(out.strip().splitlines()[-1])  # --json: one object
    assert report["env_kwargs"] == {"hops": 3, "split": "test", "protocol": "tool_calls"}
    first, second = sorted((tmp_path / "runs" / "eval" / "searchgym_FictionalQA-BM25-v0").iterdir())
    assert f"trajectories, metrics.json and em.png in {first.relative_to(tmp_path)}" in out  # a run each
    metrics = json.loads((first / "metrics.json").read_text())
    assert metrics["agents"]["oracle"]["all"]["em"] == 1.0 and metrics["agents"]["random"]["all"]["n"] == 200
    assert {"em.png", "oracle.jsonl", "heuristic.jsonl", "random.jsonl"} <= {p.name for p in first.iterdir()}
    assert json.loads((second / "metrics.json").read_text()) == report


@pytest.mark.slow
def test_the_language_model_agents_run_as_written(tmp_path):
    """The real SmolLM2 as agent and as simulator, at the README's sizes (about 2 minutes)."""
    out = bash(readme_block("Use it", "bash", 1), tmp_path).stdout
    assert out.count("hf:smollm2-135m-instruct   all  2 ") == 2 and "oracle   all  2  1.000" in out
    assert "simulator hf:smollm2-135m-instruct" in out


@pytest.mark.slow
def test_the_train_commands_run_shortened(tmp_path, tiny_llama_dir):
    """Each train command with the tiny random Llama (``--set model=PATH``) and a few episodes
    (``--set``), in order: the main job, a cost weight, --resume, --overwrite, the plots and a data
    parallel run of four processes on a config of one's own."""
    copy_configs(tmp_path)
    quickstart = (ROOT / "configs" / "quickstart.yaml").read_text()
    (tmp_path / "my.yaml").write_text(quickstart.replace("run_dir: runs/quickstart", "run_dir: runs/my"))
    short = f"{SHORT} --set model={tiny_llama_dir} {TINY} --set max_new_tokens=8 --no-progress"
    block = readme_block("Train", "bash")
    assert block.count("train --config") == 5
    out = bash(block.replace("train --config", f"train {short} --config"), tmp_path).stdout
    runs = [line.rsplit(" in ", 1)[1] for line in out.splitlines() if line.startswith("1 steps in")]
    assert runs == ["runs/quickstart", "runs/cost", "runs/quickstart", "runs/quickstart", "runs/my"]
    for run in ("quickstart", "cost", "my"):
        assert (tmp_path / "runs" / run / "checkpoints" / "step-000001" / "model.safetensors").is_file()
    assert {"reward.png", "loss.png"} <= {
        p.name for p in (tmp_path / "runs" / "quickstart" / "plots").iterdir()
    }
    cost = json.loads((tmp_path / "runs" / "cost" / "config.json").read_text())["rewards"]
    assert cost == {"outcome_metric": "em", "outcome": 1.0, "format": 0.1, "per_search": 0.1}


@pytest.mark.slow
def test_the_reward_study_runs_shortened_and_continues_where_it_stopped(tmp_path, tiny_llama_dir):
    """The study from the tiny random Llama (``--start PATH``), shortened as the README says; run
    again, it reads its evaluations back instead of training again."""
    copy_configs(tmp_path)
    block = readme_block("Train", "bash", 1).replace("python bench/", f"python {ROOT}/bench/")
    start = "--start runs/quickstart/checkpoints/step-000000"
    assert start in block
    short = f"--start {tiny_llama_dir} {STUDY_SHORT} {TINY} --set max_new_tokens=8 --set progress=false"
    first = bash(block.replace(start, short), tmp_path).stdout

    out = tmp_path / "runs" / "study"
    study = json.loads((out / "study.json").read_text())
    assert list(study["arms"]) == ["start", "outcome", "info_gain", "igpo"]
    for name in ("outcome", "info_gain", "igpo"):
        assert study["arms"][name]["n"] == 4 and study["arms"][name]["steps"] == 1
        assert study["arms"][name]["train_s"] > 0
        config = json.loads((out / name / "run" / "config.json").read_text())
        assert config["model"] == str(tiny_llama_dir) and config["warm_start_episodes"] == 0
        logged = (out / name / "run" / "metrics.jsonl").read_text()
        assert ("reward/info_gain" in logged) == (name != "outcome")
    assert json.loads((out / "igpo" / "run" / "config.json").read_text())["advantage"] == "igpo"
    assert set(study["paired"]) == {"outcome - start", "info_gain - start", "info_gain - outcome",
                                    "igpo - start", "igpo - outcome"}  # fmt: skip
    assert "igpo - outcome: " in first and (out / "study.png").stat().st_size > 0

    evaluations = {p: p.read_text() for p in out.glob("*/eval.json")}
    again = bash(block.replace(start, short), tmp_path).stdout
    assert {p: p.read_text() for p in out.glob("*/eval.json")} == evaluations
    assert again.splitlines()[:5] == first.splitlines()[:5]  # the same table


@pytest.mark.slow
def test_the_viewer_serves_what_eval_wrote(tmp_path):
    evaluate, view = readme_block("See what the agent did", "bash").split(" && ")
    bash(evaluate, tmp_path)
    server = serve(view, tmp_path, "http://127.0.0.1:8765/")
    try:
        page = urllib.request.urlopen("http://127.0.0.1:8765/", timeout=10).read().decode()
        assert "<html" in page.lower()
    finally:
        stop(server)


def test_the_plugin_entry_point_names_the_group_searchgym_loads():
    from searchgym.registry import PLUGIN_GROUP

    table = tomllib.loads(textwrap.dedent(readme_block("Your own env, agent and reward", "toml")))
    [(group, entries)] = table["project"]["entry-points"].items()
    assert group == PLUGIN_GROUP and entries == {"my_pkg": "my_pkg.searchgym_plugin:register"}


def test_the_data_example_reads_local_benchmarks(tmp_path, monkeypatch):
    """With an NQ test file where the README says (``$SEARCHGYM_DATA/qa/nq/test.jsonl``)."""
    monkeypatch.setenv("SEARCHGYM_DATA", str(tmp_path))
    (tmp_path / "qa" / "nq").mkdir(parents=True)
    row = {"id": "test_0", "question": "who wrote hamlet", "golden_answers": ["William Shakespeare"]}
    (tmp_path / "qa" / "nq" / "test.jsonl").write_text(json.dumps(row) + "\n")
    namespace: dict = {}
    exec(compile(readme_block("Data", "python"), "README.md", "exec"), namespace)
    assert len(namespace["dev"]) > 0 and namespace["dev"][0].evidence
    assert [t.answers for t in namespace["nq"]] == [("William Shakespeare",)]


@pytest.mark.slow
def test_the_data_scripts_fail_fast_offline_and_the_index_builds(tmp_path):
    """The hub is out of reach here: each fetch script fails within seconds with one line saying
    why. The BM25 build then runs as written on a small corpus where the wiki18 script puts its own.
    The first line installs the ``data`` extra, whose packages trl already brings."""
    lines = readme_block("Data", "bash").splitlines()
    install, fetch_qa, fetch_wiki, build = (line.split("  #")[0].strip() for line in lines)
    assert install == 'pip install -e ".[data]"'
    # the scripts write under ~/.cache/searchgym/data, where the build command reads
    data_dirs = ("SEARCHGYM_DATA", "XDG_CACHE_HOME")
    home = {k: v for k, v in environ(HOME=str(tmp_path)).items() if k not in data_dirs}
    for fetch in (fetch_qa, fetch_wiki):
        start = time.monotonic()
        result = subprocess.run(fetch, shell=True, cwd=ROOT, env=home, capture_output=True, text=True,
                                timeout=120)  # fmt: skip
        if result.returncode == 0:  # a machine that reaches the hub fetched the data
            continue
        assert time.monotonic() - start < 20 and result.stderr.strip().splitlines()[-1].startswith("error: ")
        assert "Traceback" not in result.stderr
    corpora = tmp_path / ".cache" / "searchgym" / "data" / "corpora"
    corpora.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "tests" / "fixtures" / "tiny_corpus.jsonl", corpora / "wiki18.jsonl")
    bash(build, tmp_path, HOME=str(tmp_path))
    assert (
        tmp_path / ".cache" / "searchgym" / "data" / "indexes" / "wiki18-bm25" / "searchgym.json"
    ).is_file()


@pytest.mark.slow
def test_the_index_builds_and_the_server_run_as_written(tmp_path):
    """On a small ``corpus.jsonl``; the server then answers Search-R1's ``POST /retrieve``."""
    if shutil.which("javac") is None:
        pytest.skip("the lucene build needs a JDK 17 (apt-get install -y openjdk-17-jdk-headless)")
    shutil.copy(ROOT / "tests" / "fixtures" / "tiny_corpus.jsonl", tmp_path / "corpus.jsonl")
    *builds, server_command = readme_block("Indexes and the retrieval server", "bash").strip().splitlines()
    bash("\n".join(builds), tmp_path, timeout=1200)
    for kind in ("bm25", "lucene", "dense"):
        assert (tmp_path / "idx" / kind / "searchgym.json").is_file()
    server = serve(server_command, tmp_path, "http://127.0.0.1:8000/health")
    try:
        body = json.dumps({"queries": ["capital"], "topk": 2, "return_scores": True}).encode()
        request = urllib.request.Request(
            "http://127.0.0.1:8000/retrieve", body, {"Content-Type": "application/json"}
        )
        [hits] = json.loads(urllib.request.urlopen(request, timeout=30).read())["result"]
        assert len(hits) == 2 and {"document", "score"} <= set(hits[0])
    finally:
        stop(server)


def test_the_live_web_env_builds_as_written(monkeypatch):
    """The block constructs the env for any ``tasks``; nothing reaches the web until an action does."""
    from searchgym import tasks as task_sets
    from searchgym.envs import WebEnv

    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "a key")
    namespace = {"tasks": list(task_sets.load("fictional-2hop", split="dev"))[:2]}
    exec(compile(readme_block("The web and the planner", "python"), "README.md", "exec"), namespace)
    env = namespace["env"]
    assert isinstance(env, WebEnv)
    _, info = env.reset(seed=0)
    assert info["question"] in {t.question for t in namespace["tasks"]}


@pytest.mark.slow
def test_the_sweeps_run_shortened(tmp_path, tiny_llama_dir):
    """The scripted sweep as written; the GRPO sweep with the tiny Llama and a step per weight."""
    copy_configs(tmp_path)
    scripted, trained = (
        line.split("  #")[0].strip() for line in readme_block("The web and the planner", "bash").splitlines()
    )
    out = bash(f"{scripted} --no-progress", tmp_path).stdout
    assert (tmp_path / "runs" / "sweep" / "pareto.png").is_file()
    assert "planner-question" in out
    bash(f"{trained} {SHORT} --set model={tiny_llama_dir} --set max_new_tokens=8 --no-progress", tmp_path)
    sweep = json.loads((tmp_path / "runs" / "planner" / "sweep.json").read_text())
    assert sweep["mode"] == "train" and [a["trained_at"] for a in sweep["agents"].values()] == [0, 0.1]
