"""Rewards as one rubric: named, weighted terms. Episode terms are a user's function, named in the
reward weights, scored once at the end of the episode (answered or truncated), weighted into the
reward and logged as its own component; step terms are measured by the env at every step."""

import pytest

import searchgym
from searchgym.agents import OracleAgent, run_episodes
from searchgym.envs.registry import check_rewards
from searchgym.envs.rubric import EpisodeRecord, Rubric, Term, evidence_recall
from searchgym.errors import ConfigError
from searchgym.registry import REWARDS

SMALL_WORLD = {"n_passages": 300}
SEEN: list[EpisodeRecord] = []


def make(terms, **kwargs):
    return searchgym.make("searchgym/FictionalQA-BM25-v0", rewards={"terms": terms}, **kwargs, **SMALL_WORLD)


def answer_length(episode: EpisodeRecord) -> float:
    SEEN.append(episode)
    return float(len(episode.prediction or ""))


def test_a_term_named_module_attr_is_weighted_into_the_last_reward_and_logged():
    plain = searchgym.make("searchgym/FictionalQA-BM25-v0", **SMALL_WORLD)
    scored = make({"test_rubric:answer_length": 0.5})
    tasks = list(plain.unwrapped.tasks[:3])
    a = run_episodes(lambda: plain, OracleAgent, tasks)
    b = run_episodes(lambda: scored, OracleAgent, tasks)
    for before, after in zip(a, b):
        length = float(len(after.prediction))
        assert after.reward_components["test_rubric:answer_length"] == length
        assert after.total_reward == pytest.approx(before.total_reward + 0.5 * length)
        assert after.turns[-1].reward == pytest.approx(before.turns[-1].reward + 0.5 * length)
        assert [t.reward for t in after.turns[:-1]] == [
            t.reward for t in before.turns[:-1]
        ]  # only at the end
    assert SEEN[-1].task.id == tasks[-1].id and SEEN[-1].n_searches == b[-1].n_searches


def test_a_truncated_episode_is_scored_too():
    searchgym.register_reward("test-terms-searched", lambda episode: float(episode.truncated))
    env = searchgym.make(
        "searchgym/FictionalQA-BM25-v0",
        max_turns=2,
        rewards={"terms": {"test-terms-searched": 1.0}},
        **SMALL_WORLD,
    )
    env.reset(seed=0)
    assert env.step("<search> a </search>")[1] == 0.0
    _, reward, terminated, truncated, info = env.step("<search> b </search>")
    assert truncated and not terminated and reward == 1.0
    assert info["reward_components"]["test-terms-searched"] == 1.0


def _own_search_env(tasks, retriever, rewards=None, max_turns=8):
    """A user's factory: searchgym's SearchEnv with the user's weights, no wrapper of its own."""
    from searchgym.envs import SearchEnv
    from searchgym.envs.rewards import RewardWeights

    return SearchEnv(tasks, retriever, rewards=RewardWeights.parse(rewards))


def _made_from_a_made_env(rewards=None):
    """A user's factory that returns an env `make` built: its episode terms are there once."""
    return searchgym.make("searchgym/FictionalQA-BM25-v0", rewards=rewards, **SMALL_WORLD)


def test_make_adds_the_episode_terms_to_every_env_a_users_entry_point_included():
    """As Gymnasium's make applies the wrappers a spec names: `make` applies the rubric's episode
    terms once, whoever built the env, and ``gymnasium.make`` gives the same env."""
    import functools

    import gymnasium as gym

    builtin = searchgym.make("searchgym/FictionalQA-BM25-v0", **SMALL_WORLD)
    tasks, retriever = builtin.unwrapped.tasks[:3], builtin.unwrapped.retriever
    searchgym.register("test-rubric/Own-v0", entry_point=functools.partial(_own_search_env, tasks, retriever))
    searchgym.register("test-rubric/Remade-v0", entry_point=_made_from_a_made_env)
    terms = {"rewards": {"terms": {"test_rubric:answer_length": 0.5}}}
    for env in (
        searchgym.make("test-rubric/Own-v0", max_turns=4, **terms),
        gym.make("test-rubric/Own-v0", max_turns=4, **terms),
        searchgym.make("test-rubric/Remade-v0", **terms),
    ):
        (episode,) = run_episodes(lambda env=env: env, OracleAgent, tasks[:1])
        length = float(len(episode.prediction))
        assert episode.reward_components["test_rubric:answer_length"] == length  # scored once
        assert episode.turns[-1].reward == pytest.approx(episode.em + 0.5 * length)
    assert searchgym.make("test-rubric/Own-v0").spec.max_episode_steps is None  # a TurnLimit, not gym's


def test_built_in_evidence_recall_reads_the_retrieved_ids():
    assert "evidence_recall" in searchgym.list_rewards()
    env = searchgym.make(
        "searchgym/FictionalQA-BM25-v0", rewards={"terms": {"evidence_recall": 1.0}}, **SMALL_WORLD
    )
    [episode] = run_episodes(lambda: env, OracleAgent, list(env.unwrapped.tasks[:1]))
    assert episode.reward_components["evidence_recall"] == episode.evidence_recall == 1.0


def test_bad_terms_fail_when_the_env_is_made():
    with pytest.raises(
        ConfigError, match="unknown reward function 'evidence_recal'. Did you mean 'evidence_recall'"
    ):
        searchgym.make(
            "searchgym/FictionalQA-BM25-v0", rewards={"terms": {"evidence_recal": 1.0}}, **SMALL_WORLD
        )
    with pytest.raises(ConfigError, match="weight of reward term 'evidence_recall' must be a number"):
        searchgym.make(
            "searchgym/FictionalQA-BM25-v0", rewards={"terms": {"evidence_recall": "x"}}, **SMALL_WORLD
        )
    with pytest.raises(ConfigError, match="cannot import 'no_such_module'"):
        searchgym.make(
            "searchgym/FictionalQA-BM25-v0", rewards={"terms": {"no_such_module:f": 1}}, **SMALL_WORLD
        )
    assert "evidence_recall" in REWARDS and evidence_recall.__doc__


@pytest.mark.parametrize(
    ("env_id", "rewards"),
    [
        ("searchgym/FictionalQA-BM25-v0", {"format": 0.2, "per_search": 0.05, "per_1k_obs_tokens": 0.3}),
        ("searchgym/FictionalQA-BM25-v0", {"per_search": 0.1, "cost_only_if_correct": True}),
        ("searchgym/FictionalQA-Planner-v0", {"per_search": 0.05, "per_turn": 0.02, "format": 0.1}),
        ("searchgym/FictionalQA-Web-v0", {"per_search": 0.05, "per_1k_obs_tokens": 0.1}),
    ],
)
def test_every_reward_is_the_rubrics_weighted_sum_of_the_terms_it_logs(env_id, rewards):
    """One rubric: each step's reward is the weighted sum of the values it logs under the terms'
    names, so an episode's return is the weighted sum of its summed components (what adapters
    hand to other trainers), costs included with their negative weights."""
    rewards = {**rewards, "terms": {"evidence_recall": 0.5}}
    env = searchgym.make(env_id, rewards=rewards, **SMALL_WORLD)
    rubric = env.unwrapped.rubric
    assert [t.name for t in rubric.terms][-1] == "evidence_recall" and rubric.at("trainer") == ()
    assert rubric.weight("search_calls") == -rewards["per_search"]
    episodes = run_episodes(lambda: env, OracleAgent, list(env.unwrapped.tasks[:4]))
    weights = rubric.weights()
    for episode in episodes:
        assert set(episode.reward_components) == set(weights)
        for turn in episode.turns:
            step = {k: v for k, v in turn.reward_components.items() if k != "evidence_recall"}
            recall = episode.reward_components["evidence_recall"] if turn is episode.turns[-1] else 0.0
            assert turn.reward == pytest.approx(rubric.total(step) + 0.5 * recall)
        weighted = sum(weights[name] * value for name, value in episode.reward_components.items())
        assert weighted == pytest.approx(episode.total_reward)
    assert all(rubric.cost(ep.reward_components) > 0 for ep in episodes if ep.em)  # costs charged


def test_terms_have_one_name_and_episode_and_trainer_terms_a_function():
    outcome = Term("outcome", 1.0)
    with pytest.raises(ConfigError, match=r"reward term\(s\) \['outcome'\] appear twice"):
        Rubric((outcome, Term("outcome", 0.5)))
    for term in (
        ("recall", 1.0, "episode"),
        ("gain", 1.0, "trainer"),
        ("outcome", 1.0, "step", evidence_recall),
    ):
        with pytest.raises(ConfigError, match="episode and trainer terms have a function, step terms"):
            Term(*term)
    rubric = Rubric((outcome, Term("search_calls", -0.1))).plus(Term("info_gain", 2.0, "trainer", len))
    assert rubric.weights() == {"outcome": 1.0, "search_calls": -0.1}  # what an env scores
    assert rubric.weight("info_gain") == 2.0 and rubric.weight("absent") == 0.0
    assert rubric.cost({"outcome": 1.0, "search_calls": 3.0}) == pytest.approx(0.3)
    assert rubric.total({"outcome": 1.0, "search_calls": 3.0}) == pytest.approx(0.7)


def test_an_envs_reward_weights_class_is_read_from_its_factory():
    """`searchgym train` checks reward weights before it makes an env: the planner's factory takes
    `PlannerRewards` (with ``per_turn``), the others `RewardWeights`."""
    check_rewards("searchgym/FictionalQA-Planner-v0", {"per_turn": 0.1})
    with pytest.raises(ConfigError, match=r"unknown reward weight\(s\) \['per_turn'\]"):
        check_rewards("searchgym/FictionalQA-BM25-v0", {"per_turn": 0.1})
    with pytest.raises(ConfigError, match="per_turn is a cost and must be >= 0"):
        check_rewards("searchgym/FictionalQA-Planner-v0", {"per_turn": -1})


def test_step_gain_pays_each_new_gold_passage_and_charges_each_repeat():
    """StepSearch's step reward, scored by the env: the oracle's two searches each show one of a
    2-hop question's two gold passages (+0.5 each); a search repeated shows only what it showed."""
    env = make({"step_gain": 1.0}, hops=[2], top_k=1)
    task = env.unwrapped.tasks[0]
    (oracle,) = run_episodes(lambda: env, OracleAgent, [task])
    assert oracle.reward_components["step_gain"] == 1.0
    first = f"<search> {task.metadata['chain'][0]['query']} </search>"
    env.reset(options={"task": task})
    env.step(first)
    env.step(first)
    *_, info = env.step("<answer> nothing </answer>")
    assert info["reward_components"]["step_gain"] == 0.5 - 1.0
    assert "step_gain" in searchgym.list_rewards()


def test_the_citation_term_counts_the_cited_hops_that_reach_the_answer():
    """CaRR's rubric reward on a 2-hop question, the env asking for citations: the oracle cites
    both hops' passages (1.0); citing only the last hop's gives 0.5, only the first's 0 (the chain
    is broken before the answer); a title never shown counts for nothing, and a wrong answer gets 0.
    The answer is scored without its citations."""
    env = make({"citation": 1.0}, hops=[2], top_k=1, citations=True)
    task = env.unwrapped.tasks[0]
    assert "[China]" in env.reset(options={"task": task})[0]  # the cited answer's example
    (oracle,) = run_episodes(lambda: env, OracleAgent, [task])
    assert oracle.em == 1.0 and oracle.reward_components["citation"] == 1.0
    (first, last) = task.metadata["chain"]

    def cite(*titles, answer=task.answers[0]):
        env.reset(options={"task": task})
        for hop in task.metadata["chain"]:
            env.step(f"<search> {hop['query']} </search>")
        *_, info = env.step(f"<answer> {answer} {' '.join(f'[{t}]' for t in titles)} </answer>")
        return info["em"], info["reward_components"]["citation"]

    assert cite(last["title"]) == (1.0, 0.5)
    assert cite(first["title"]) == (1.0, 0.0)
    assert cite(first["title"], last["title"], "A Title Never Shown") == (1.0, 1.0)
    assert cite(first["title"], last["title"], answer="somebody else") == (0.0, 0.0)
    env.reset(options={"task": task})
    *_, info = env.step(f"<answer> {task.answers[0]} [{first['title']}] [{last['title']}] </answer>")
    assert info["cited_ids"] == [] and info["reward_components"]["citation"] == 0.0  # none shown


def test_citations_need_the_cited_answer_tool():
    from searchgym.envs import SearchEnv
    from searchgym.envs.protocols import make_protocol

    tasks = searchgym.make("searchgym/FictionalQA-BM25-v0", **SMALL_WORLD).unwrapped.tasks
    with pytest.raises(ConfigError, match="CITED_ANSWER"):
        SearchEnv(tasks, None, protocol=make_protocol("tags"), citations=True)


def test_the_judge_term_scores_each_judged_search_result_as_reseek_does():
    """A 2-hop question, the env asking for judgements: the first hop's search shows its gold
    passage (useful), a repeat of it shows nothing new. Judged Yes then No before a right answer:
    0.4 + 0.4; judged No then Yes before a wrong one: -0.3 - 0.6; unjudged: 0."""
    env = make({"judge": 1.0}, hops=[2], top_k=1, judge=True)
    task = env.unwrapped.tasks[0]
    assert "<judge>Yes</judge>" in env.reset(options={"task": task})[0]
    first = f"<search> {task.metadata['chain'][0]['query']} </search>"

    def play(said_first, said_second, answer):
        env.reset(options={"task": task})
        env.step(first)
        *_, info = env.step(f"{said_first} {first}")
        assert info["judgement"] == ({"<judge>Yes</judge>": True, "<judge>No</judge>": False}.get(said_first))
        *_, info = env.step(f"{said_second} <answer> {answer} </answer>")
        return round(info["reward_components"]["judge"], 6)

    assert play("<judge>Yes</judge>", "<judge>No</judge>", task.answers[0]) == 0.8
    assert play("<judge>No</judge>", "<judge>Yes</judge>", "somebody") == -0.9
    assert play("", "", task.answers[0]) == 0.0
