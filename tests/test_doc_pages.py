"""Every code block of the docs pages runs as a reader would run it: verbatim, with a server's port
changed to a free one, or shortened the way the page says. `test_every_block_has_a_test` fails on a
block that no test covers, so a new block comes with its test."""

import ast
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from doc_blocks import DOCS, ROOT, doc_block, free_port, page_blocks, serve, stop

# (page, language, index among the page's blocks of that language) -> the test that runs it
BLOCKS = {
    ("trainers/openenv.md", "bash", 0): "test_the_openenv_and_mcp_pages_run_against_their_server",
    ("trainers/openenv.md", "python", 0): "test_the_openenv_and_mcp_pages_run_against_their_server",
    ("trainers/openenv.md", "python", 1): "test_the_openenv_and_mcp_pages_run_against_their_server",
    ("trainers/mcp.md", "python", 0): "test_the_openenv_and_mcp_pages_run_against_their_server",
    ("trainers/trl.md", "bash", 0): "test_train_with_trl_runs_as_written",
    ("trainers/trl.md", "python", 0): "test_train_with_trl_runs_as_written",
    ("trainers/skyrl.md", "python", 0): "agents/integrations/test_skyrl_env.py::test_the_docs_example_runs",
    (
        "trainers/skyrl.md",
        "bash",
        0,
    ): "agents/integrations/test_skyrl_env.py::test_the_docs_skyrl_command_configures_the_env",
    ("trainers/verifiers.md", "bash", 0): "agents/integrations/test_verifiers_env.py::test_docs_page_runs",
    ("trainers/verifiers.md", "python", 0): "agents/integrations/test_verifiers_env.py::test_docs_page_runs",
    (
        "trainers/verifiers.md",
        "bash",
        1,
    ): "agents/integrations/test_verifiers_env.py::test_docs_page_verifiers03_section_runs",
    (
        "trainers/verifiers.md",
        "python",
        1,
    ): "agents/integrations/test_verifiers_env.py::test_docs_page_verifiers03_section_runs",
    ("trainers/verl.md", "python", 0): "agents/integrations/test_verl_adapter.py::test_the_docs_page_runs",
    ("trainers/verl.md", "bash", 0): "agents/integrations/test_verl_adapter.py::test_the_docs_page_runs",
    ("programs.md", "python", 0): "test_the_programs_page_shows_the_readmes_program",
    ("programs.md", "bash", 0): "test_the_programs_page_shows_the_readmes_program",
    ("programs.md", "bash", 1): "test_the_standalone_gateway_runs_as_written",
    ("programs.md", "python", 1): "test_the_standalone_gateway_runs_as_written",
    ("getting-started.md", "bash", 0): "test_guide_pages.py::test_the_install_line_is_the_readmes_set_up",
    (
        "getting-started.md",
        "bash",
        1,
    ): "test_guide_pages.py::test_the_laptop_install_is_the_main_install_from_pytorchs_cpu_index",
    ("getting-started.md", "bash", 2): "test_guide_pages.py::test_the_eval_commands_run_as_written",
    ("getting-started.md", "bash", 3): "test_guide_pages.py::test_the_language_model_agents_run_as_written",
    ("getting-started.md", "text", 0): "test_guide_pages.py::test_the_eval_commands_run_as_written",
    ("getting-started.md", "bash", 4): "test_guide_pages.py::test_your_own_questions_run_as_written",
    ("architecture.md", "text", 0): "test_guide_pages.py::test_the_architecture_names_only_files_that_exist",
    ("architecture.md", "text", 1): "test_guide_pages.py::test_the_architecture_names_only_files_that_exist",
    ("architecture.md", "text", 2): "test_guide_pages.py::test_the_architecture_names_only_files_that_exist",
    ("environments.md", "python", 0): "test_guide_pages.py::test_the_live_web_env_builds_as_written",
    ("environments.md", "bash", 0): "test_guide_pages.py::test_the_sweeps_run_shortened",
    ("retrievers.md", "bash", 0): "test_guide_pages.py::test_the_corpus_builds_saves_and_loads_as_written",
    ("retrievers.md", "python", 0): "test_guide_pages.py::test_the_corpus_builds_saves_and_loads_as_written",
    ("retrievers.md", "bash", 1): "test_guide_pages.py::test_the_index_builds_and_the_server_run_as_written",
    ("tasks.md", "python", 0): "test_guide_pages.py::test_the_data_example_reads_local_benchmarks",
    ("tasks.md", "python", 1): "test_guide_pages.py::test_the_questions_example_runs_as_written",
    ("tasks.md", "bash", 1): "test_guide_pages.py::test_the_self_play_commands_run_as_written",
    (
        "tasks.md",
        "bash",
        0,
    ): "test_guide_pages.py::test_the_data_scripts_fail_fast_offline_and_the_index_builds",
    ("training.md", "bash", 0): "test_guide_pages.py::test_the_train_commands_run_shortened",
    (
        "training.md",
        "bash",
        1,
    ): "test_guide_pages.py::test_the_reward_study_runs_shortened_and_continues_where_it_stopped",
    ("training.md", "bash", 2): "test_guide_pages.py::test_the_rescore_commands_run_shortened",
    ("plug-in.md", "python", 0): "test_guide_pages.py::test_a_reward_term_reads_the_episode_as_the_page_says",
    (
        "plug-in.md",
        "python",
        1,
    ): "test_guide_pages.py::test_the_pages_trainer_term_registers_and_a_config_weighs_it",
    (
        "plug-in.md",
        "python",
        2,
    ): "envs/test_backends.py::test_the_plug_in_pages_retriever_kind_runs_as_written",
    (
        "plug-in.md",
        "toml",
        0,
    ): "test_guide_pages.py::test_the_plugin_entry_point_names_the_group_searchgym_loads",
    ("viewer.md", "bash", 0): "test_guide_pages.py::test_the_viewer_serves_what_eval_wrote",
    ("fanoutqa.md", "bash", 0): "tasks/test_fanoutqa.py::test_the_docs_eval_command_runs_as_written",
    ("fanoutqa.md", "python", 0): "tasks/test_fanoutqa.py::test_the_docs_python_example_runs_as_written",
}


def all_blocks() -> list[tuple[str, str, int]]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        page = path.relative_to(DOCS).as_posix()
        languages = [lang for lang, _ in page_blocks(page)]
        found += [(page, lang, languages[:i].count(lang)) for i, lang in enumerate(languages)]
    return found


def test_every_block_has_a_test():
    assert sorted(all_blocks()) == sorted(BLOCKS)
    for test in set(BLOCKS.values()):
        module, _, name = test.rpartition("::")
        source = (Path(__file__).parent / (module or "test_doc_pages.py")).read_text()
        assert re.search(rf"^def {name}\(", source, re.M), test


def run_python(code: str, page: str) -> str:
    """Run a page's Python block; what it prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/{page}", "exec"), {"__name__": "__main__"})
    return out.getvalue()


def test_the_openenv_and_mcp_pages_run_against_their_server():
    """The OpenEnv page's serve-env command (on a free port instead of 8001), then its two client
    blocks and the MCP page's block against it, as written."""
    port = str(free_port())
    command = shlex.split(doc_block("trainers/openenv.md", "bash"))
    assert command[:2] == ["searchgym", "serve-env"] and "8001" in command
    command = [port if part == "8001" else part for part in command]
    exe = Path(sys.executable).parent / "searchgym"
    server = subprocess.Popen([str(exe), *command[1:]], stdout=subprocess.PIPE, text=True)
    try:
        assert f"127.0.0.1:{port}" in server.stdout.readline()
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            assert time.monotonic() < deadline and server.poll() is None, "serve-env did not start"
            time.sleep(0.2)

        def block(page: str, index: int = 0) -> str:
            return doc_block(page, "python", index).replace(":8001", f":{port}")

        lines = run_python(block("trainers/openenv.md"), "trainers/openenv.md").splitlines()
        assert lines[0].startswith("Answer the given question.")
        assert any(line.startswith("1.0 True {'outcome': 1.0") for line in lines)
        assert "task_id='fictional/dev/1hop/000000'" in next(line for line in lines if "n_searches=1" in line)
        assert lines[-1] == "1.0 1"  # the oracle's episode: right, after one search
        printed = run_python(block("trainers/openenv.md", 1), "trainers/openenv.md")
        assert "Treimyne Company was founded in 1898" in printed and printed.rstrip().endswith("0.0 False")
        printed = run_python(block("trainers/mcp.md"), "trainers/mcp.md").splitlines()
        assert printed[0] == "['search', 'answer']" and printed[-1] == "1.0 True"
        assert "Question: What is the founding year of the company Treimyne Company?" in printed
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_programs_page_shows_the_readmes_program():
    """The page's program and commands are the README's, which test_readme_blocks.py runs."""
    from test_readme import readme_block

    for language in ("python", "bash"):
        assert doc_block("programs.md", language) == readme_block("Train your own agent program", language)


def test_the_standalone_gateway_runs_as_written(tmp_path, monkeypatch):
    """The page's gateway command with the real SmolLM2 (on a free port instead of 8002), then its
    client block against it, as written: the reply comes back and the call is in the record."""
    port = str(free_port())
    command = doc_block("programs.md", "bash", 1).strip()
    assert shlex.split(command)[:2] == ["searchgym", "gateway"] and "8002" in command
    server = serve(command.replace("8002", port), tmp_path, f"http://127.0.0.1:{port}/health")
    try:
        monkeypatch.chdir(tmp_path)
        client = doc_block("programs.md", "python", 1).replace(":8002", f":{port}")
        printed = run_python(client, "programs.md")
    finally:
        stop(server)
    *_, n_ids, episode = printed.split()
    assert episode == "episode-1" and 0 < int(n_ids) <= 16


def test_the_trl_block_trains_on_the_env_its_warm_start_used():
    from searchgym.agents.train.config import load_config

    block = doc_block("trainers/trl.md", "python")
    options = ast.literal_eval(re.search(r"^options = (\{.*\})$", block, re.M).group(1))
    [command] = [line for line in doc_block("trainers/trl.md", "bash").splitlines() if line.strip()]
    cfg = load_config(ROOT / shlex.split(command.split("#")[0])[3])
    warm_env = {**cfg.env_kwargs, "max_turns": cfg.max_turns, "rewards": cfg.rewards}
    assert warm_env == {"protocol": "tool_calls", **options}
    assert cfg.chat_template == "qwen2_5" and cfg.steps == 0 and cfg.warm_start_episodes > 0
    assert f'trl_model("{cfg.run_dir}")' in block


@pytest.mark.slow
def test_train_with_trl_runs_as_written(tmp_path, monkeypatch):
    """The trl page on a CPU: its warm start, shortened to 16 oracle episodes through the
    ``--set`` the config names, then its trl block verbatim, two GRPO steps. trl parses the warm-started
    SmolLM2's tool calls, the env's reward reaches it and the update changes the weights. (A random
    tiny Llama cannot stand in: a test-sized warm start does not teach it to write a well-formed call
    about a question it has not seen, so trl would get no call and no reward.)"""
    import torch
    from safetensors.torch import load_file

    [command] = [line for line in doc_block("trainers/trl.md", "bash").splitlines() if line.strip()]
    run = shlex.split(command.split("#")[0])
    assert run[:2] == ["searchgym", "train"]
    run_dir = tmp_path / "runs" / "trl-warm-start"  # where the block looks, from tmp_path
    shorter = ["--set", "warm_start_episodes=16", "--run-dir", str(run_dir), "--no-progress"]
    exe = Path(sys.executable).parent / "searchgym"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    result = subprocess.run([str(exe), *run[1:], *shorter], cwd=ROOT, capture_output=True, text=True, env=env,
                            timeout=1800)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]

    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(doc_block("trainers/trl.md", "python"), "docs/trainers/trl.md", "exec"), namespace)
    trainer = namespace["trainer"]
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert trainer.state.global_step == 2 and len(logs) == 2
    assert all(h["tools/call_frequency"] > 0 for h in logs)  # trl parsed the model's calls
    assert max(h["rewards/TrlEnv/mean"] for h in logs) > 0  # and the env's reward reached it
    warm = load_file(run_dir / "checkpoints" / "step-000000" / "model.safetensors")
    trained = {k: v.detach().float().cpu() for k, v in trainer.model.state_dict().items()}
    assert any(not torch.equal(warm[k].float(), trained[k]) for k in warm), "no parameter changed"
