"""The frozen generator's side of `PlannerEnv`: the prompt it reads, how its reply becomes an
answer, and `ExtractiveReader`, the model-free generator the registered env uses by default.

The prompt gives every search the planner made, in order, with the results the planner was shown
(already cut to the env's ``max_obs_tokens``), then the question::

    Answer the question using the search results below. Reply with only the answer, as short as
    possible, between <answer> and </answer>.

    Search 1: Merian Jevane born
    Doc 1(Title: Merian Jevane (early life)) Merian Jevane was born on 1 September 1963 in …
    Doc 2(Title: …) …

    Search 2: Dreisent mayor
    Doc 1(Title: Dreisent) Located in the country of Dinavia, Dreisent is known for …

    Question: Who is the mayor of the city in which Merian Jevane was born?

The planner's own reasoning is not shown: the generator answers from evidence, and a planner
cannot pass it an answer in its thoughts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from searchgym.errors import ConfigError
from searchgym.generation import Completion, Message, SamplingParams, check_conversations
from searchgym.tasks.extractive import extract_answer, parse_docs

INSTRUCTION = (
    "Answer the question using the search results below. Reply with only the answer, as short as "
    "possible, between <answer> and </answer>."
)
NO_SEARCHES = "No searches were made."
_QUESTION = "\n\nQuestion: "
_SEARCH_RE = re.compile(r"^Search \d+: .*$", re.M)
_THINK_RE = re.compile(r"<think>.*?(?:</think>|\Z)", re.S)


def generator_prompt(question: str, searches: Sequence[tuple[str, str]]) -> str:
    """The generator's prompt from the question and the planner's ``(query, results text)``
    searches, in order.

    >>> prompt = generator_prompt("Who founded Orvo?", [("Orvo", "Doc 1(Title: Orvo) Bo Lind founded Orvo.")])
    >>> prompt.split("\\n\\n")[1:]
    ['Search 1: Orvo\\nDoc 1(Title: Orvo) Bo Lind founded Orvo.', 'Question: Who founded Orvo?']
    """
    blocks = [f"Search {i}: {query}\n{text}" for i, (query, text) in enumerate(searches, 1)]
    return "\n\n".join([INSTRUCTION, *(blocks or [NO_SEARCHES])]) + _QUESTION + question


def parse_reply(reply: str) -> str:
    """The answer in a generator's reply: reasoning in ``<think>…</think>`` is dropped, then the
    text of the last ``<answer>`` (to ``</answer>`` or the end: servers drop stop strings), else
    the whole reply, stripped.

    >>> parse_reply("<think>It is Paris.</think> <answer> Paris </answer>")
    'Paris'
    >>> parse_reply("Lyon."), parse_reply("<answer>Oslo")
    ('Lyon.', 'Oslo')
    """
    text = _THINK_RE.sub("", reply)
    if "<answer>" in text:
        text = text.rsplit("<answer>", 1)[1].split("</answer>", 1)[0]
    return text.strip()


class ExtractiveReader:
    """A model-free `TextGenerator` for `generator_prompt` prompts. It reads one document, the
    way `HeuristicAgent` reads its top document (`extract_answer`): the top document of the last
    search whose top document is new (no earlier search showed it; the last search's, if none
    is), and replies ``<answer>span</answer>`` (``<answer>unknown</answer>`` when no search found
    a document). A planner thus does well when its last new finding is the document that holds
    the answer: on a multi-hop question, only once it has searched every hop; a search that
    finds nothing new does not distract it.

    >>> prompt = generator_prompt("Who founded Orvo?", [("Orvo", "Doc 1(Title: Orvo) Bo Lind founded Orvo.")])
    >>> ExtractiveReader().chat([[{"role": "user", "content": prompt}]], SamplingParams())[0].text
    '<answer>Bo Lind</answer>'
    """

    name = "extractive-reader"

    def chat(self, conversations: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        check_conversations(conversations)
        return [Completion(f"<answer>{self.read(conv[-1]['content'])}</answer>") for conv in conversations]

    def read(self, prompt: str) -> str:
        """The answer span for one `generator_prompt` prompt."""
        body, sep, question = prompt.rpartition(_QUESTION)
        if not sep or not body.startswith(INSTRUCTION):
            raise ConfigError(
                "ExtractiveReader reads the prompts of searchgym.envs.reader.generator_prompt (the planner "
                f"env's generator prompt); got {prompt[:80]!r}"
            )
        seen: set[tuple[str, str]] = set()
        tops: list[tuple[tuple[str, str], bool]] = []  # each search's top document, and whether it is new
        for block in _SEARCH_RE.split(body)[1:]:
            docs = [(title, text.strip()) for title, text in parse_docs(block)]
            if docs:
                tops.append((docs[0], docs[0] not in seen))
            seen.update(docs)
        if not tops:
            return "unknown"
        title, text = next((doc for doc, new in reversed(tops) if new), tops[-1][0])
        return extract_answer(question, f"{title}. {text}", title_first=True)
