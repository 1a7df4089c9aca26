"""A search agent written with the OpenAI Agents SDK (``openai-agents``), as its docs show: an
`Agent` with two function tools, run by `Runner`. searchgym trains it unchanged.

Why this framework: its chat-completions model takes the episode's ``AsyncOpenAI`` client as it
is (``OpenAIChatCompletionsModel(openai_client=client)``), so the gateway's base URL and key flow
through unchanged; it is pure Python with light dependencies (``openai``, ``pydantic``, ``mcp`` and
HTTP libraries: no torch, no model runtime); and it calls tools the chat-completions way (``tools``
in, ``tool_calls`` out). Tracing is off: it would export to OpenAI's servers, and nothing here
leaves the machine.
"""

from agents import (
    Agent,
    MaxTurnsExceeded,
    OpenAIChatCompletionsModel,
    Runner,
    StopAtTools,
    function_tool,
    set_tracing_disabled,
)

set_tracing_disabled(True)


async def run(question, client, tools):
    @function_tool
    def search(query: str) -> str:
        """Search the knowledge source; the top results are returned.

        Args:
            query: A few keywords or a short question.
        """
        return tools.search(query=query)

    @function_tool
    def answer(answer: str) -> str:
        """Give the final answer, as short as possible. This ends the episode.

        Args:
            answer: The final answer.
        """
        return tools.answer(answer=answer)

    agent = Agent(
        name="searcher",
        instructions="Answer the question. Search as often as you need, then call answer.",
        tools=[search, answer],
        tool_use_behavior=StopAtTools(stop_at_tool_names=["answer"]),
        model=OpenAIChatCompletionsModel(model="policy", openai_client=client),
    )
    try:
        result = await Runner.run(agent, question, max_turns=8)
    except MaxTurnsExceeded:
        return None  # an episode the env's turn limit ended is scored as it is; any other has no answer
    return None if tools.done else result.final_output  # answered with the tool, or in text
