"""Check a dataclass's field values against their annotations, so a config read from YAML or the
command line fails at once with a message naming the field, never deep inside training.
A leaf module: every layer may import it.

Understood annotations: ``Literal[...]``, ``int`` (not bool), ``float`` (an int is accepted;
NaN is not), ``bool``, ``str``, ``dict[...]``, ``list[...]`` (with their element types),
unions (``X | None``, ``Optional[X]``) and ``Any``. Other annotations are not checked.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import os
import textwrap
import types
import typing
from typing import Any, Literal

from searchgym.errors import ConfigError, DataNotFoundError


def known_fields(cls: type, values: dict[str, Any], what: str) -> dict[str, Any]:
    """``values`` if every key is a field of dataclass ``cls``, else a `ConfigError` naming them
    (``what`` names the fields in the message).

    >>> from searchgym.generation import SamplingParams
    >>> known_fields(SamplingParams, {"temprature": 0.5}, "sampling field")
    Traceback (most recent call last):
    ...
    searchgym.errors.ConfigError: unknown sampling field(s) ['temprature']; known: [...]
    """
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown {what}(s) {unknown}; known: {sorted(known)}")
    return values


def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal under it in the class body), by field name, for
    the fields of ``cls`` and of its dataclass bases; a field without one is left out.

    >>> from searchgym.envs.rewards import RewardWeights
    >>> field_docs(RewardWeights)["per_search"]
    'Cost of one search call (λ_call).'
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for node, after in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def check_field_types(obj: Any) -> None:
    """Raise `ConfigError` for the first field of dataclass instance ``obj`` whose value does
    not match its annotation. Call it first in ``__post_init__``.

    >>> @dataclasses.dataclass
    ... class Config:
    ...     steps: int = 1
    ...     def __post_init__(self):
    ...         check_field_types(self)
    >>> Config(steps="abc")
    Traceback (most recent call last):
    ...
    searchgym.errors.ConfigError: steps must be an integer, got 'abc' (a str)
    """
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        expected = hints.get(f.name, Any)
        if not matches(value, expected):
            raise ConfigError(
                f"{f.name} must be {describe(expected)}, got {value!r} (a {type(value).__name__})"
                + _float_hint(value, expected)
            )


def _float_hint(value: Any, expected: Any) -> str:
    """YAML 1.1 reads ``3e-5`` (no dot) as a string: say how to write the number.

    >>> _float_hint("3e-5", float)
    '; YAML reads a number in e-notation without a dot as text: write 3.0e-5'
    """
    if not (isinstance(value, str) and matches(1.0, expected)):
        return ""
    mantissa, e, exponent = value.lower().partition("e")
    try:
        float(value)
    except ValueError:
        return ""
    if not e or "." in mantissa:
        return ""
    return f"; YAML reads a number in e-notation without a dot as text: write {mantissa}.0e{exponent}"


def matches(value: Any, tp: Any) -> bool:
    """Whether ``value`` is of annotation ``tp`` (see the module docstring).

    >>> matches(3, float), matches(True, int), matches([1, "a"], list[int]), matches(None, int | None)
    (True, False, False, True)
    """
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return True
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, a) for a in args)
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)
    if tp is str:
        return isinstance(value, str)
    if tp is dict or origin is dict:
        key, item = args or (Any, Any)
        return isinstance(value, dict) and all(matches(k, key) and matches(v, item) for k, v in value.items())
    if tp is list or origin is list:
        (item,) = args or (Any,)
        return isinstance(value, list) and all(matches(v, item) for v in value)
    return True  # an annotation this checker does not know: not checked


def describe(tp: Any) -> str:
    """An annotation in words, for error messages.

    >>> describe(Literal["em", "f1"] | None), describe(dict[str, Any])
    ("one of 'em', 'f1' or None", 'a mapping')
    """
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin in (typing.Union, types.UnionType):
        words = [describe(a) for a in args if a is not type(None)]
        return " or ".join(words + (["None"] if type(None) in args else []))
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if tp in names:
        return names[tp]
    if tp is dict or origin is dict:
        return "a mapping"
    if tp is list or origin is list:
        return f"a list, each item {describe(args[0])}" if args and args[0] is not Any else "a list"
    return getattr(tp, "__name__", str(tp))


def check_int(name: str, value: Any, low: int = 1) -> None:
    """`ConfigError` unless ``value`` is an integer (not a bool) of at least ``low``.

    >>> check_int("top_k", 3)
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")


MAX_YAML_BYTES = 1_000_000
"""The largest YAML config read: a config is a few hundred bytes."""
MAX_YAML_DEPTH = 32
"""The deepest nesting of lists and mappings a YAML value may have (configs nest 3 levels)."""
MAX_YAML_VALUES = 100_000
"""The most values a YAML document may hold once its aliases are expanded (no alias bombs)."""


class YAMLLimitError(Exception):
    """A YAML text breaks a rule of `StrictLoader`; ``mark`` is where (``mark.line`` from 0)."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem, self.mark = problem, mark


@functools.cache
def _strict_loader() -> type:
    import yaml
    from yaml.nodes import MappingNode, SequenceNode

    class StrictLoader(yaml.SafeLoader):
        """`yaml.SafeLoader` that refuses a key given twice in one mapping, and values nested
        deeper than `MAX_YAML_DEPTH` or holding more than `MAX_YAML_VALUES` (aliases expanded)."""

        _depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self._depth += 1
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise YAMLLimitError(f"nested deeper than {MAX_YAML_DEPTH} levels", mark)
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
            if isinstance(node, SequenceNode | MappingNode) and not hasattr(node, "extent"):
                pairs = node.value if isinstance(node, MappingNode) else [(child,) for child in node.value]
                children = [child for pair in pairs for child in pair]
                extents = [getattr(child, "extent", (1, 1)) for child in children]
                node.extent = (1 + max((d for d, _ in extents), default=0), 1 + sum(n for _, n in extents))
                if node.extent[0] > MAX_YAML_DEPTH:  # through aliases
                    raise YAMLLimitError(f"nested deeper than {MAX_YAML_DEPTH} levels", node.start_mark)
                if node.extent[1] > MAX_YAML_VALUES:
                    raise YAMLLimitError(
                        f"holds more than {MAX_YAML_VALUES:,} values once its aliases are expanded",
                        node.start_mark,
                    )
            return node

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, MappingNode):
                first: dict[Any, Any] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        seen = first.setdefault(key, key_node.start_mark)
                    except TypeError:  # unhashable: SafeLoader's own error
                        break
                    if seen is not key_node.start_mark:
                        raise YAMLLimitError(
                            f"duplicate key {key!r} (first on line {seen.line + 1}); give each key once",
                            key_node.start_mark,
                        )
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def load_yaml(text: str) -> Any:
    """``text`` read as YAML by a safe loader that also refuses duplicate keys, values nested
    deeper than `MAX_YAML_DEPTH` and alias bombs (`YAMLLimitError`; malformed YAML raises
    ``yaml.YAMLError``).

    >>> load_yaml("{a: [1, 2]}")
    {'a': [1, 2]}
    >>> load_yaml("a: 1\\na: 2")
    Traceback (most recent call last):
    ...
    searchgym.config_types.YAMLLimitError: duplicate key 'a' (first on line 1); give each key once
    """
    import yaml

    return yaml.load(text, Loader=_strict_loader())  # noqa: S506 (a SafeLoader)


def read_yaml(path: str | os.PathLike) -> Any:
    """The YAML document in file ``path`` (`load_yaml`); a missing, unreadable, non-UTF-8, larger
    than `MAX_YAML_BYTES` or malformed file is a one-line `ConfigError` (`DataNotFoundError` if
    missing), naming the line where the YAML is wrong."""
    import yaml

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_YAML_BYTES + 1)
        if len(data) > MAX_YAML_BYTES:
            raise ConfigError(f"{path} is larger than {MAX_YAML_BYTES:,} bytes; is it a config?")
        return load_yaml(data.decode("utf-8"))
    except FileNotFoundError:
        raise DataNotFoundError(f"config file {path} does not exist") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except OSError as e:
        raise ConfigError(f"cannot read {path} ({e.strerror})") from None
    except YAMLLimitError as e:
        raise ConfigError(f"{path}:{e.mark.line + 1}: {e.problem}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {' '.join(str(e).split())}") from None


def parse_yaml(text: str, what: str) -> Any:
    """``text`` read as a YAML value (`load_yaml`; ``what`` names it in the error: e.g. ``--set steps``).

    >>> parse_yaml("{a: [1, 2]}", "x")
    {'a': [1, 2]}
    """
    import yaml

    try:
        return load_yaml(text)
    except YAMLLimitError as e:
        raise ConfigError(f"{what}: {e.problem}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{what}: {text!r} is not valid YAML ({getattr(e, 'problem', e)})") from None
