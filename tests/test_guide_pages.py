"""The guide pages' code blocks run as a reader would run them: verbatim, from a fresh directory,
or with their sizes scaled down the way the page says (`doc_blocks.SHORT`). `test_doc_pages.py`
maps each block to its test here."""

import json
import re
import shutil
import subprocess
import textwrap
import time
import urllib.request
from types import SimpleNamespace

import pytest
import tomllib
from doc_blocks import ROOT, SHORT, STUDY_SHORT, TINY, bash, copy_configs, doc_block, environ, serve, stop


def test_the_laptop_install_is_the_main_install_from_pytorchs_cpu_index():
    """Not run here (download.pytorch.org is out of reach): the same torch and extras as the
    README's install, with torch from PyTorch's CPU index first."""
    main = (ROOT / "README.md").read_text()
    venv, torch, rest = (
        line.split("#")[0].strip() for line in doc_block("getting-started.md", "bash", 1).strip().splitlines()
    )
    assert venv in main
    assert torch == "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    assert f"pip install torch==2.13.0 {rest.removeprefix('pip install ')}" in main


def test_the_install_line_is_the_readmes_set_up():
    """The page's install is the set-up both README commands start with."""
    install = doc_block("getting-started.md", "bash").strip()
    readme = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    commands = [line for line in readme.splitlines() if line and not line.startswith("#")]
    assert all(command.startswith(install + " && ") for command in commands)


@pytest.mark.slow
def test_the_eval_commands_run_as_written(tmp_path):
    """The page's eval commands, then its figures against what they printed: the rows it quotes,
    and the heuristic's EM on hops 1–4, on one hop, on 2–4 hops and, run here, on two hops alone."""
    out = bash(doc_block("getting-started.md", "bash", 2), tmp_path).stdout
    assert "searchgym/FictionalQA-BM25-v0" in out
    report = json.loads(out.strip().splitlines()[-1])  # --json: one object
    assert report["env_kwargs"] == {"hops": 3, "split": "test", "protocol": "tool_calls"}
    first, second = sorted((tmp_path / "runs" / "eval" / "searchgym_FictionalQA-BM25-v0").iterdir())
    assert f"trajectories, metrics.json and em.png in {first.relative_to(tmp_path)}" in out  # a run each
    metrics = json.loads((first / "metrics.json").read_text())
    assert metrics["agents"]["oracle"]["all"]["em"] == 1.0 and metrics["agents"]["random"]["all"]["n"] == 200
    assert {"em.png", "oracle.jsonl", "heuristic.jsonl", "random.jsonl"} <= {p.name for p in first.iterdir()}
    assert json.loads((second / "metrics.json").read_text()) == report

    printed = out.splitlines()
    quoted = doc_block("getting-started.md", "text").strip().splitlines()
    assert all(line in printed for line in quoted), set(quoted) - set(printed)
    page = " ".join((ROOT / "docs" / "getting-started.md").read_text().split())
    figures = re.search(
        r"the heuristic .*?: EM (\S+) on those (\d+) questions of hops 1–4, which is (\S+) on the (\d+) "
        r"one-hop questions and (\S+) on the (\d+) of 2–4 hops \(`-E hops=2` plays (\d+) two-hop questions: "
        r"EM (\S+)\); the random agent writes random actions \(EM (\S+)\)",
        page,
    ).groups()
    heuristic = metrics["agents"]["heuristic"]
    hops = heuristic["by_hops"]
    two_hop_run = "searchgym eval --agent heuristic --n 200 -E hops=2 --json --no-progress --out two"
    two_hop = json.loads(bash(two_hop_run, tmp_path).stdout)["agents"]["heuristic"]["all"]
    assert set(hops) == {"1", "2", "3", "4"} and {hops[h]["em"] for h in "234"} == {0.0}
    assert figures == (
        f"{heuristic['all']['em']:.3f}",
        str(heuristic["all"]["n"]),
        f"{hops['1']['em']:.3f}",
        str(hops["1"]["n"]),
        "0.000",
        str(sum(hops[h]["n"] for h in "234")),
        str(two_hop["n"]),
        f"{two_hop['em']:.3f}",
        f"{metrics['agents']['random']['all']['em']:.3f}",
    )


@pytest.mark.slow
def test_your_own_questions_run_as_written(tmp_path):
    """The page's questions file and its two evals, and what the page says they print."""
    out = bash(doc_block("getting-started.md", "bash", 4), tmp_path).stdout
    first, second = out.split("trajectories, metrics.json")[:2]
    assert "tasks: 2 of the 2 of questions.jsonl/dev  seed 0" in first
    assert re.search(r"^ +oracle +all +2 +1\.000 ", first, re.M) and re.search(
        r"^heuristic +all +2 +1\.000 ", first, re.M
    )
    assert "tasks: 3 of the 3 of questions.jsonl/test  seed 0" in second
    assert re.search(r"^heuristic +all +3 +0\.667 ", second, re.M)
    page = " ".join((ROOT / "docs" / "getting-started.md").read_text().split())
    assert "The first prints `tasks: 2 of the 2 of questions.jsonl/dev` and EM 1.000 for both agents" in page
    assert "the heuristic misses the two-hop q3 (EM 0.667)" in page
    runs = sorted((tmp_path / "runs" / "eval" / "searchgym_FictionalQA-BM25-v0").iterdir())
    episodes = [json.loads(line) for line in (runs[1] / "heuristic.jsonl").read_text().splitlines()]
    assert {ep["task_id"]: ep["em"] for ep in episodes} == {"q1": 1.0, "q2": 1.0, "q3": 0.0}


@pytest.mark.slow
def test_the_language_model_agents_run_as_written(tmp_path):
    """The real SmolLM2 as agent and as simulator, at the README's sizes (about 2 minutes)."""
    out = bash(doc_block("getting-started.md", "bash", 3), tmp_path).stdout
    assert out.count("hf:smollm2-135m-instruct   all  2 ") == 2 and "oracle   all  2  1.000" in out
    assert "simulator hf:smollm2-135m-instruct" in out
    assert out.count("hf:smollm2-135m-instruct   all  2  0.000 ") == 2  # the page: EM 0.000 in both runs
    page = " ".join((ROOT / "docs" / "getting-started.md").read_text().split())
    assert "often run to the 8-turn limit (EM 0.000 in both runs)" in page


@pytest.mark.slow
def test_the_train_commands_run_shortened(tmp_path, tiny_llama_dir):
    """Each train command with the tiny random Llama (``--set model=PATH``) and a few episodes
    (``--set``), in order: the main job, a cost weight, --resume, --overwrite, the plots and a data
    parallel run of four processes on a config of one's own."""
    copy_configs(tmp_path)
    quickstart = (ROOT / "configs" / "quickstart.yaml").read_text()
    (tmp_path / "my.yaml").write_text(quickstart.replace("run_dir: runs/quickstart", "run_dir: runs/my"))
    short = f"{SHORT} --set model={tiny_llama_dir} {TINY} --set max_new_tokens=8 --no-progress"
    block = doc_block("training.md", "bash")
    assert block.count("train --config") == 5
    out = bash(block.replace("train --config", f"train {short} --config"), tmp_path).stdout
    runs = [line.rsplit(" in ", 1)[1] for line in out.splitlines() if line.startswith("1 steps in")]
    assert runs == ["runs/quickstart", "runs/cost", "runs/quickstart", "runs/my"]
    assert "runs/quickstart already finished at step 1" in out  # --resume of a finished run: nothing to do
    for run in ("quickstart", "cost", "my"):
        assert (tmp_path / "runs" / run / "checkpoints" / "step-000001" / "model.safetensors").is_file()
    assert {"reward.png", "loss.png"} <= {
        p.name for p in (tmp_path / "runs" / "quickstart" / "plots").iterdir()
    }
    cost = json.loads((tmp_path / "runs" / "cost" / "config.json").read_text())["rewards"]
    assert cost == {
        "outcome_metric": "em",
        "outcome": 1.0,
        "format": 0.1,
        "terms": {"info_gain": 1.0},
        "per_search": 0.1,
    }


@pytest.mark.slow
def test_the_rescore_commands_run_shortened(tmp_path, tiny_llama_dir):
    """The quick try with every episode saved, shortened with the tiny random Llama, then rescored
    with an evidence term and a search cost: a rescored run beside it, every group complete."""
    copy_configs(tmp_path)
    block = doc_block("training.md", "bash", 2)
    short = (
        f"{SHORT} --set model={tiny_llama_dir} --set policy=hf --set policy_kwargs={{}} {TINY} --no-progress"
    )
    assert block.count("train --config") == 1 and "searchgym rescore runs/qt" in block
    out = bash(block.replace("train --config", f"train {short} --config"), tmp_path).stdout
    report = json.loads((tmp_path / "runs" / "qt" / "rescore" / "rescore.json").read_text())
    assert report["new_rewards"]["terms"] == {"info_gain": 1.0, "evidence_recall": 0.5}
    (step,) = report["steps"]
    assert (
        step["episodes"] == 4 and step["complete_groups"] == 2 and step["reward_old"] == step["reward_logged"]
    )
    assert "episodes, metrics.jsonl and rescore.json in runs/qt/rescore" in out


@pytest.mark.slow
def test_the_reward_study_runs_shortened_and_continues_where_it_stopped(tmp_path, tiny_llama_dir):
    """The study from the tiny random Llama (``--start PATH``), shortened as the README says; run
    again, it reads its evaluations back instead of training again."""
    copy_configs(tmp_path)
    block = doc_block("training.md", "bash", 1).replace("python bench/", f"python {ROOT}/bench/")
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
    evaluate, view = doc_block("viewer.md", "bash").split(" && ")
    bash(evaluate, tmp_path)
    server = serve(view, tmp_path, "http://127.0.0.1:8765/")
    try:
        page = urllib.request.urlopen("http://127.0.0.1:8765/", timeout=10).read().decode()
        assert "<html" in page.lower()
    finally:
        stop(server)


def test_the_plugin_entry_point_names_the_group_searchgym_loads():
    from searchgym.registry import PLUGIN_GROUP

    table = tomllib.loads(textwrap.dedent(doc_block("plug-in.md", "toml")))
    [(group, entries)] = table["project"]["entry-points"].items()
    assert group == PLUGIN_GROUP and entries == {"my_pkg": "my_pkg.searchgym_plugin:register"}


def test_the_data_example_reads_local_benchmarks(tmp_path, monkeypatch):
    """With an NQ test file where the README says (``$SEARCHGYM_DATA/qa/nq/test.jsonl``)."""
    monkeypatch.setenv("SEARCHGYM_DATA", str(tmp_path))
    (tmp_path / "qa" / "nq").mkdir(parents=True)
    row = {"id": "test_0", "question": "who wrote hamlet", "golden_answers": ["William Shakespeare"]}
    (tmp_path / "qa" / "nq" / "test.jsonl").write_text(json.dumps(row) + "\n")
    namespace: dict = {}
    exec(compile(doc_block("tasks.md", "python"), "docs", "exec"), namespace)
    assert len(namespace["dev"]) > 0 and namespace["dev"][0].evidence
    assert [t.answers for t in namespace["nq"]] == [("William Shakespeare",)]


@pytest.mark.slow
def test_the_data_scripts_fail_fast_offline_and_the_index_builds(tmp_path):
    """The hub is out of reach here: each fetch script fails within seconds with one line saying
    why. The BM25 build then runs as written on a small corpus where the wiki18 script puts its own.
    The first line installs the ``data`` extra, whose packages trl already brings."""
    lines = doc_block("tasks.md", "bash").splitlines()
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
    *builds, server_command = doc_block("retrievers.md", "bash", 1).strip().splitlines()
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


def test_the_corpus_builds_saves_and_loads_as_written(tmp_path, monkeypatch, capsys):
    """The page's corpus (both row shapes) built by the CLI, then its Python block verbatim: what
    each line prints is what its comment says; then the env it registers over the index, as the
    page writes it, plays a question."""
    bash(doc_block("retrievers.md", "bash", 0), tmp_path)
    assert (tmp_path / "idx" / "bm25" / "searchgym.json").is_file()
    monkeypatch.chdir(tmp_path)
    block = doc_block("retrievers.md", "python", 0)
    namespace: dict = {"__name__": "__main__"}
    exec(compile(block, "docs/retrievers.md", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    said = [line.split("# ", 1)[1] for line in block.splitlines() if line.lstrip().startswith("print(")]
    assert printed == [said[0], said[1], said[1]]  # the loop prints once per index
    assert (tmp_path / "idx" / "my-bm25" / "searchgym.json").is_file()

    import searchgym

    page = (ROOT / "docs" / "retrievers.md").read_text()
    [register] = re.findall(r"`(searchgym\.register\(\"my/CityQA-v0\".*?)`", " ".join(page.split()))
    (tmp_path / "questions.jsonl").write_text(
        '{"question": "Which city is the capital of France?", "answers": ["Paris"]}\n'
    )
    exec(register, {"searchgym": searchgym, "BM25": namespace["BM25"]})
    env = searchgym.make("my/CityQA-v0")
    env.reset(seed=0)
    observation, *_ = env.step("<search> capital of France </search>")
    assert "Doc 1(Title: Paris)" in observation


def test_the_questions_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """The tasks page's questions file, loaded by split: it prints what its comments say."""
    monkeypatch.chdir(tmp_path)
    block = doc_block("tasks.md", "python", 1)
    exec(compile(block, "docs/tasks.md", "exec"), {"__name__": "__main__"})
    said = [line.split("# ", 1)[1] for line in block.splitlines() if line.startswith("print(")]
    assert capsys.readouterr().out.splitlines() == said


def test_the_self_play_commands_run_as_written(tmp_path):
    """The proposer's 50 questions are all verified; the oracle answers every one, and the
    heuristic's EM is the pass rate the first command printed, as the page says."""
    propose, evaluate = doc_block("tasks.md", "bash", 1).splitlines()
    first = bash(propose + " --no-progress", tmp_path).stdout
    assert "50 of 50 proposals verified" in first
    rate = float(first.split("solver pass rate ")[1].split()[0])
    table = bash(evaluate + " --no-progress", tmp_path).stdout
    rows = {line.split()[0]: line.split() for line in table.splitlines() if line.split()[1:2] == ["all"]}
    assert rows["oracle"][3] == "1.000" and float(rows["heuristic"][3]) == rate


def test_the_live_web_env_builds_as_written(monkeypatch):
    """The block constructs the env for any ``tasks``; nothing reaches the web until an action does."""
    from searchgym import tasks as task_sets
    from searchgym.envs import WebEnv

    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "a key")
    namespace = {"tasks": list(task_sets.load("fictional-2hop", split="dev"))[:2]}
    exec(compile(doc_block("environments.md", "python"), "docs", "exec"), namespace)
    env = namespace["env"]
    assert isinstance(env, WebEnv)
    _, info = env.reset(seed=0)
    assert info["question"] in {t.question for t in namespace["tasks"]}


@pytest.mark.slow
def test_the_sweeps_run_shortened(tmp_path, tiny_llama_dir):
    """The scripted sweep as written; the GRPO sweep with the tiny Llama and a step per weight."""
    copy_configs(tmp_path)
    scripted, trained = (
        line.split("  #")[0].strip() for line in doc_block("environments.md", "bash").splitlines()
    )
    out = bash(f"{scripted} --no-progress", tmp_path).stdout
    assert (tmp_path / "runs" / "sweep" / "pareto.png").is_file()
    assert "planner-question" in out
    bash(f"{trained} {SHORT} --set model={tiny_llama_dir} --set max_new_tokens=8 --no-progress", tmp_path)
    sweep = json.loads((tmp_path / "runs" / "planner" / "sweep.json").read_text())
    assert sweep["mode"] == "train" and [a["trained_at"] for a in sweep["agents"].values()] == [0, 0.1]


def test_the_training_page_names_the_shortening_the_tests_use():
    page = " ".join((ROOT / "docs" / "training.md").read_text().split())
    assert SHORT in page and STUDY_SHORT in page and TINY in page


def test_the_architecture_names_only_files_that_exist():
    """Every path the diagrams name is a file or folder of the repository."""
    for i in range(3):
        diagram = doc_block("architecture.md", "text", i)
        paths = re.findall(r"\b(?:searchgym|envs|agents|retrievers|tasks)/[\w/]*(?:\.py)?", diagram)
        assert paths, i
        for path in paths:
            assert (ROOT / path).exists(), path


def test_a_reward_term_reads_the_episode_as_the_page_says(capsys):
    from searchgym.registry import REWARDS

    block = doc_block("plug-in.md", "python")
    try:
        exec(compile(block, "docs/plug-in.md", "exec"), {})
    finally:
        del REWARDS._specs["found_all_evidence"]
    shown = [line.split("# ")[-1] for line in block.splitlines() if line.startswith("print(")]
    assert capsys.readouterr().out.splitlines() == shown  # what its comments show


def test_the_pages_trainer_term_registers_and_a_config_weighs_it():
    from searchgym.agents.train.config import GRPOConfig
    from searchgym.registry import TRAINER_REWARDS

    block = doc_block("plug-in.md", "python", 1)
    scope: dict = {"searchgym": __import__("searchgym")}
    try:
        exec(compile(block, "docs/plug-in.md", "exec"), scope)
        weights = {"info_gain": 1.0, "searches_before_answer": 0.05}  # as the page's comment
        assert "terms: {info_gain: 1.0, searches_before_answer: 0.05}" in block
        cfg = GRPOConfig(rewards={"outcome": 1.0, "terms": weights})
        assert (cfg.trainer_terms, cfg.env_rewards) == (weights, {"outcome": 1.0})
        episode = SimpleNamespace(turns=[SimpleNamespace(tool="search"), SimpleNamespace(tool="answer")])
        assert TRAINER_REWARDS.resolve("searches_before_answer")([episode], None) == [[1.0]]
    finally:
        del TRAINER_REWARDS._specs["searches_before_answer"]
