"""Every value of a training config is checked when the config loads, before any model or env:
each numeric field has a range, and YAML configs refuse duplicate keys, deep nesting and alias
bombs, naming the line (the CLI's side of it: tests/test_cli_errors.py)."""

import dataclasses
import typing
from pathlib import Path

import pytest

from searchgym.agents.train.config import RANGES, GRPOConfig, load_config
from searchgym.config_types import YAMLLimitError, load_yaml
from searchgym.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_every_numeric_field_has_a_range():
    hints = typing.get_type_hints(GRPOConfig)
    numeric = {
        f.name
        for f in dataclasses.fields(GRPOConfig)
        if {int, float} & {hints[f.name], *typing.get_args(hints[f.name])}
    }
    assert numeric == set(RANGES)


@pytest.mark.parametrize("name", ["quickstart", "quicktry", "planner", "trl_warm_start"])
def test_the_shipped_configs_pass(name):
    load_config(CONFIGS / f"{name}.yaml")


@pytest.mark.parametrize(
    ("field", "bad", "good"),
    [
        ("seed", -1, 2**32 - 1),
        ("weight_decay", -0.1, 0.0),
        ("max_grad_norm", 0.0, 0.5),
        ("top_p", 1.01, 1.0),
        ("igpo_gamma", 0.0, 1.0),
        ("max_refill_seconds", -1.0, None),
        ("warm_start_lr", float("inf"), 1e-4),
    ],
)
def test_a_value_out_of_range_is_refused_at_its_bound(field, bad, good):
    GRPOConfig(**{field: good})
    with pytest.raises(ConfigError, match=f"^{field} must be "):
        GRPOConfig(**{field: bad})


def test_a_key_given_twice_is_refused_at_its_line_however_deep():
    with pytest.raises(YAMLLimitError, match=r"duplicate key 'hops' \(first on line 3\)") as caught:
        load_yaml("steps: 1\nenv_kwargs:\n  hops: [1]\n  top_k: 2\n  hops: [2]\n")
    assert caught.value.mark.line + 1 == 5


def test_merge_keys_and_aliases_are_no_duplicates_but_aliases_count_toward_the_depth():
    text = "base: &base {top_k: 2}\nenv_kwargs:\n  <<: *base\n  top_k: 3\n"
    assert load_yaml(text)["env_kwargs"] == {"top_k": 3}
    deep = "a: &x0 " + "[" * 20 + "]" * 20 + "\nb: &x1 " + "[" * 20 + "*x0" + "]" * 20 + "\n"
    with pytest.raises(YAMLLimitError, match="nested deeper than 32 levels"):
        load_yaml(deep)
