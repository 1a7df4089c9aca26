"""A user's own env reaches the env server by its id alone: the app `searchgym serve-env` serves
(`create_env_app`), made in a process that never imported the package that registers the env,
serves it to OpenEnv's client. (Each trainer's adapter has the same test in its own file.)"""

import re

from user_env import PLUGIN_ENV

from searchgym.agents.integrations.openenv.client import SearchgymEnvClient, play_episode
from searchgym.agents.integrations.openenv.server import create_env_app
from searchgym.retrievers.server import ServerThread


class YearAgent:
    """Searches the question, then answers the first year it read (the server sends no answers)."""

    def reset(self, info):
        self.protocol, self.question, self.searched = info["protocol"], info["question"], False

    def act(self, observation):
        if not self.searched:
            self.searched = True
            return self.protocol.format_turn("", "search", self.question)
        return self.protocol.format_turn("", "answer", re.findall(r"\b1\d{3}\b", observation)[0])


def test_serve_env_serves_an_installed_plugins_env(user_envs):
    app = create_env_app(PLUGIN_ENV)
    with ServerThread(app) as server, SearchgymEnvClient(base_url=server.url).sync() as env:
        episode = play_episode(env, YearAgent(), task_id="q0", seed=0)
    assert episode.em == 1.0 and episode.n_searches == 1 and episode.prediction == "1843"
