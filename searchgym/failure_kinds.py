"""The names of the ways an episode fails, in the order `searchgym.agents.play.failures.failure_kind`
decides them: the vocabulary its judge writes into saved episodes and the viewer reads back."""

KINDS = (
    "program_error",
    "turn_limit",
    "protocol",
    "reading_miss",
    "early_answer",
    "wrong_entity",
    "wrong_relation",
    "retrieval_miss",
    "unknown",
)
"""Every failure kind, in the order they are decided."""
