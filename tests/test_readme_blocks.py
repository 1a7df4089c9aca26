"""Every code block of the README runs as a new user would run it: verbatim, from a fresh directory,
or shortened the way the docs say. `test_every_readme_block_has_a_test` fails on a block that no
test covers, so a new block comes with its test; the docs pages' blocks are `test_doc_pages.py`'s."""

import json
import re
import shlex
import sys
import urllib.request

import httpx
import pytest
from doc_blocks import ROOT, TINY, bash, free_port, serve, stop
from test_readme import readme_block

OWN = "Your own env, agent and reward"
PROGRAM = "Train your own agent program"
# What tests a block: (README section, language, index in the section) -> the test's name.
BLOCKS = {
    ("searchgym", "bash", 0): "test_readme.py::test_two_commands_with_the_same_setup_as_ci",  # and CI
    ("searchgym", "text", 0): "test_the_loop_picture_shows_the_envs_own_actions",
    ("Use it", "python", 0): "test_readme.py::test_usage_example_runs_and_prints_what_the_readme_says",
    ("Use it", "bash", 0): "test_the_command_line_block_runs_as_written",
    (OWN, "python", 0): "test_readme.py::test_your_own_env_agent_and_reward_run_as_written",
    (OWN, "bash", 0): "test_readme.py::test_your_own_env_agent_and_reward_run_as_written",
    (PROGRAM, "python", 0): "test_your_own_agent_program_runs_as_written",
    (PROGRAM, "bash", 0): "test_your_own_agent_program_runs_as_written",
}


def readme_blocks() -> list[tuple[str, str, int]]:
    """(section, language, index) of every fenced code block of the README."""
    sections = (ROOT / "README.md").read_text().split("\n## ")
    found = []
    for section in sections:
        heading = section.split("\n", 1)[0].removeprefix("# ")
        languages = re.findall(r"^ *```(\w+)\n", section, re.M)
        found += [(heading, lang, languages[:i].count(lang)) for i, lang in enumerate(languages)]
    return found


def test_every_readme_block_has_a_test():
    assert sorted(readme_blocks()) == sorted(BLOCKS)
    here = sys.modules[__name__]
    for test in BLOCKS.values():
        module, _, name = test.rpartition("::")
        assert callable(getattr(sys.modules[module.removesuffix(".py")] if module else here, name)), test


def test_the_readme_is_short_and_links_only_to_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for target in re.findall(r"\]\(((?!https?:)[^)#]+)", readme):
        assert (ROOT / target).is_file(), target


def test_the_loop_picture_shows_the_envs_own_actions():
    """The actions the picture shows are valid in the default protocol, and the parts it names are
    the env's API."""
    import searchgym

    picture = re.search(r"```text\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    env = searchgym.make("searchgym/FictionalQA-BM25-v0")
    protocol = env.unwrapped.protocol
    search, answer = re.findall(r'"(<\w+> \w </\w+>)"', picture)
    assert protocol.parse(search.replace(" q ", " capital ")).name == "search"
    assert protocol.parse(answer.replace(" a ", " Paris ")).name == "answer"
    assert "env.reset" in picture and "env.step" in picture and "agent.act" in picture
    env.close()


@pytest.mark.slow
def test_the_command_line_block_runs_as_written(tmp_path):
    """Each line of the README's command-line block, in order, from a fresh directory with the
    repository's configs: the listing, the evaluation, the viewer over it, the quick try with the
    real SmolLM2 (its own run directory), and the env server. The servers are probed, then stopped."""
    lines = [line.split("  #")[0].strip() for line in readme_block("Use it", "bash").strip().splitlines()]
    listing, evaluate, view, quick_try, serve_env = lines
    bash(f"cp -r {ROOT}/configs .", tmp_path)
    assert "searchgym/FictionalQA-BM25-v0" in bash(listing, tmp_path).stdout
    assert "oracle" in bash(f"{evaluate} --no-progress", tmp_path).stdout
    server = serve(view, tmp_path, "http://127.0.0.1:8765/")
    try:
        assert "<html" in urllib.request.urlopen("http://127.0.0.1:8765/", timeout=10).read().decode().lower()
    finally:
        stop(server)

    out = bash(f"{quick_try} --no-progress", tmp_path, timeout=1800).stdout
    assert re.search(r"after SFT: EM [\d.]+ \[[\d.]+, [\d.]+\]", out), out[-2000:]
    assert "gain of GRPO" in out
    run = tmp_path / "runs" / "quicktry"
    config = json.loads((run / "config.json").read_text())
    assert (run / "checkpoints" / f"step-{config['steps']:06d}" / "model.safetensors").is_file()
    assert config["model"] == "smollm2-135m-instruct"

    port = free_port()
    server = serve(f"{serve_env} --port {port}", tmp_path, f"http://127.0.0.1:{port}/health")
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/schema", timeout=10).status_code == 200
    finally:
        stop(server)
    assert shlex.split(serve_env)[:2] == ["searchgym", "serve-env"]


@pytest.mark.slow
def test_your_own_agent_program_runs_as_written(tmp_path, tiny_llama_dir):
    """The program section verbatim: my_agent.py, its evaluation with the real SmolLM2 behind the
    gateway (on 4 tasks, not 100), and its training on the tiny random Llama, shortened."""
    (tmp_path / "my_agent.py").write_text(readme_block(PROGRAM, "python"))
    bash(f"cp -r {ROOT}/configs .", tmp_path)
    lines = readme_block(PROGRAM, "bash").strip().splitlines()
    evaluate, train = [line.split("  #")[0].strip() for line in lines]
    out = bash(evaluate.replace("--n 100", "--n 4") + " --no-progress --out runs/eval", tmp_path).stdout
    assert re.search(r"my_agent:run +all +4 ", out), out
    rows = [json.loads(line) for line in (tmp_path / "runs" / "eval" / "my_agent_run.jsonl").open()]
    assert all(row["error"] is None and row["n_searches"] == 1 and row["terminated"] for row in rows)
    short = "--set steps=1 --set eval_tasks=2 --set tasks_per_step=2 --set group_size=2"
    short += " --set dynamic_sampling=false --set oversample=1"  # a random model scores 0: no refills
    tiny = f"--set model={tiny_llama_dir} --set policy=hf {TINY}"
    out = bash(f"{train} {tiny} {short} --no-progress", tmp_path, timeout=900).stdout
    assert "gain of GRPO" in out
    assert (tmp_path / "runs" / "program" / "checkpoints" / "step-000001" / "model.safetensors").is_file()
