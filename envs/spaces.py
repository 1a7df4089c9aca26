"""A Gymnasium space of Unicode strings.

`gymnasium.spaces.Text` only admits a fixed character set (alphanumerics by default), which
rejects ordinary model output such as punctuation, tags and accented letters. `UnicodeText`
admits any `str` up to a length.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Space

_SAMPLE_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'\"<>/()-_éüñ—中文😀\n"
)


class UnicodeText(Space[str]):
    """Any Unicode string of at most ``max_length`` characters.

    >>> space = UnicodeText(32)
    >>> space.contains("<search>Zürich 中文</search>"), space.contains("x" * 33), space.contains(3)
    (True, False, False)
    """

    def __init__(self, max_length: int, seed: int | np.random.Generator | None = None) -> None:
        if max_length < 1:
            raise ValueError(f"max_length must be positive, got {max_length}")
        self.max_length = int(max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string (length up to 64) drawn from letters, digits, punctuation, tag
        characters and a few non-ASCII ones."""
        if mask is not None or probability is not None:
            raise NotImplementedError("UnicodeText.sample takes no mask or probability")
        n = int(self.np_random.integers(0, min(self.max_length, 64) + 1))
        picks = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=n)
        return "".join(_SAMPLE_ALPHABET[i] for i in picks)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length
