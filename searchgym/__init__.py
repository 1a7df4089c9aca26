"""searchgym: Gymnasium environments in which language-model agents answer questions by searching.

>>> import searchgym
>>> env = searchgym.make("searchgym/FictionalQA-BM25-v0")  # doctest: +SKIP
"""

__version__ = "0.1.0"

from searchgym.envs.registry import list_ids, make, register  # noqa: E402  (registers the envs)

__all__ = ["__version__", "list_ids", "make", "register"]
