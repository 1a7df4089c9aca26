"""`searchgym sweep`: the Pareto front on hand-made points, the sweep API and CLI on the planner
env with scripted planners, and training mode with a tiny random model."""

import json

import pytest

import searchgym
from searchgym.agents import make_agent, run_episodes, summarize
from searchgym.cli import main
from searchgym.errors import ConfigError
from searchgym.sweep import Point, best_at, evaluate_agents, evaluate_sweep, pareto_front, parse_weights

ENV_ID = "searchgym/FictionalQA-Planner-v0"
SMALL_WORLD = {"n_passages": 300}


@pytest.mark.parametrize(
    ("points", "front"),
    [
        ([], []),
        ([(1.0, 0.5)], [0]),
        # dominated: (2, 0.4) by (1, 0.5); (1, 0.3) by (1, 0.5) at equal cost; (3, 0.9) kept twice
        ([(0.0, 0.1), (1.0, 0.5), (2.0, 0.4), (3.0, 0.9), (1.0, 0.3), (3.0, 0.9)], [0, 1, 3, 5]),
        # equal accuracy: only the cheapest is on the front
        ([(2.0, 0.5), (1.0, 0.5), (3.0, 0.5)], [1]),
        # every point trades cost for accuracy: all on the front, by increasing cost
        ([(3.0, 0.9), (1.0, 0.2), (2.0, 0.6)], [1, 2, 0]),
        # one point beats the rest on both
        ([(1.0, 0.2), (0.5, 0.8), (2.0, 0.7)], [1]),
    ],
)
def test_pareto_front_on_hand_made_points(points, front):
    assert pareto_front(points) == front


def point(accuracy, searches, reward=None):
    reward = accuracy if reward is None else reward
    return Point(accuracy, accuracy, searches, searches + 1, reward, searches, 10)


def test_best_agent_at_each_weight():
    points = {"none": point(0.0, 0.0), "one": point(0.3, 1.0), "all": point(0.5, 2.5)}
    assert [best_at(points, w) for w in (0.0, 0.1, 0.2, 0.35)] == ["all", "all", "one", "none"]
    assert points["one"].reward_at(0.2) == pytest.approx(0.1)
    tie = {"b": point(0.5, 2.0), "a": point(0.5, 1.0), "c": point(0.5, 1.0)}
    assert best_at(tie, 0.0) == "a"  # equal reward: the cheaper, then the first given


@pytest.mark.parametrize("text", ["", "0,x", "-0.1", "nan"])
def test_bad_weights(text):
    with pytest.raises(ConfigError):
        parse_weights(text)


def test_one_evaluation_scores_every_weight_exactly(tmp_path):
    """The reward a sweep computes at λ is the reward the env gives with per_search = λ."""
    points, n = evaluate_agents(ENV_ID, ["planner-2"], n=12, env_kwargs=SMALL_WORLD, out=tmp_path)
    assert n == 12 and (tmp_path / "planner-2.jsonl").is_file()
    played = {json.loads(line)["task_id"] for line in (tmp_path / "planner-2.jsonl").read_text().splitlines()}
    tasks = [t for t in searchgym.make(ENV_ID, **SMALL_WORLD).unwrapped.tasks if t.id in played]
    assert len(tasks) == 12
    for weight in (0.05, 0.3):
        kwargs = {**SMALL_WORLD, "rewards": {"per_search": weight}}
        episodes = run_episodes(
            lambda kwargs=kwargs: searchgym.make(ENV_ID, **kwargs), lambda: make_agent("planner-2"), tasks
        )
        assert points["planner-2"].reward_at(weight) == pytest.approx(summarize(episodes)["return"])


def test_cost_only_if_correct_charges_only_right_answers(tmp_path):
    kwargs = {**SMALL_WORLD, "rewards": {"cost_only_if_correct": True}}
    points, _ = evaluate_agents(ENV_ID, ["oracle"], n=20, env_kwargs=kwargs)
    oracle = points["oracle"]
    assert 0 < oracle.accuracy < 1 and oracle.cost_units < oracle.searches


def test_evaluate_sweep_writes_the_report_and_the_plot(tmp_path):
    agents = ["planner-0", "planner-1", "planner-2", "planner-question", "oracle"]
    report = evaluate_sweep(ENV_ID, agents, [0.0, 0.1, 1.0], tmp_path, n=20, env_kwargs=SMALL_WORLD)
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert saved["mode"] == "evaluate" and saved["n"] == 20 and saved["env_kwargs"] == SMALL_WORLD
    a = saved["agents"]
    assert a["planner-0"]["searches"] == 0.0 and a["planner-0"]["accuracy"] == 0.0
    assert a["planner-question"]["searches"] == 1.0 and a["planner-question"]["turns"] == 2.0
    front = pareto_front([(a[n]["searches"], a[n]["accuracy"]) for n in agents])
    assert saved["front"] == [agents[i] for i in front] and saved["front"][0] == "planner-0"
    assert all(a[n]["pareto"] == (n in saved["front"]) for n in agents)
    by_weight = {row["lambda"]: row for row in saved["weights"]}
    assert by_weight[1.0]["best"] == "planner-0" and by_weight[1.0]["reward"] == 0.0  # searching never pays
    assert by_weight[0.0]["best"] in {"planner-2", "oracle"}  # the most accurate
    for row in saved["weights"]:
        assert row["reward"] == max(row["rewards"].values())
        assert row["rewards"]["oracle"] == pytest.approx(
            a["oracle"]["base_reward"] - row["lambda"] * a["oracle"]["searches"]
        )
    png = (tmp_path / "pareto.png").read_bytes()
    assert png[:4] == b"\x89PNG" and len(png) > 10_000
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == sorted(f"{n}.jsonl" for n in agents)


def test_sweep_command(tmp_path, capsys):
    argv = ["sweep", "--weights", "0,0.2", "--agents", "planner-0,planner-1,planner-4", "--n", "8"]
    argv += ["-E", "n_passages=300", "--out", str(tmp_path), "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "planner-4" in out and "λ" in out and f"sweep.json and pareto.png in {tmp_path}" in out
    assert (tmp_path / "pareto.png").is_file()
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [row["lambda"] for row in report["weights"]] == [0.0, 0.2] and set(report["agents"]) == {
        "planner-0",
        "planner-1",
        "planner-4",
    }


SMALL = ["-E", "n_passages=300", "--no-progress"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--weights", "0,-1"], "each finite and >= 0"),
        (["--weights", "0", "--agents", "planer-1", *SMALL], "Did you mean 'planner-1'"),
        (["--weights", "0", "--set", "steps=1"], "--set overrides keys of a training config"),
        (["--weights", "0", "--config", "x.yaml", "--agents", "oracle"], "--agents: not with --config"),
        (["--weights", "0", "--config", "missing.yaml"], "config file missing.yaml does not exist"),
        (["--weights", "0", "-E", "rewards={per_search: 0.1}", *SMALL], "sets the search cost"),
        (
            ["--weights", "0", "--env", "searchgym/FictionalQA-BM25-v0", "--generator", "hf:x"],
            "takes no generator",
        ),
        (["--weights", "0", "--generator", "docs"], "--generator takes BACKEND:MODEL"),
    ],
)
def test_sweep_errors(capsys, argv, message):
    assert main(["sweep", *argv]) == 2
    assert message in capsys.readouterr().err


def test_plot_pareto_names_must_be_points(tmp_path):
    from searchgym.plots import plot_pareto

    points = {"a": (0.0, 0.0), "b": (1.0, 0.5), "c": (1.0, 0.5)}
    path = plot_pareto(points, ["a", "b", "c"], {"b": [0.0, 0.1], "a": [1.0]}, tmp_path / "p.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ConfigError, match=r"not given: \['z'\]"):
        plot_pareto(points, ["a", "z"], {}, tmp_path / "q.png")
