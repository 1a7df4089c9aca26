"""What the viewer opens: the runs found under the paths it is given.

- an eval directory (``searchgym eval --out``): ``metrics.json`` and one ``AGENT.jsonl`` of
  episodes per agent;
- a training run (``searchgym train --run-dir``): ``metrics.jsonl`` (the curves) and
  ``episodes/step-NNNNNN.jsonl``, a sample of each step's rollout episodes, each row an episode
  plus ``"step"`` and ``"group"``;
- a sweep (``searchgym sweep --out``): ``sweep.json`` and one JSONL of episodes per agent;
- a single episodes ``.jsonl`` file.

A directory is searched for runs three levels down, so ``runs/`` opens every run in it. Each
run carries the env it played as its own files record it (`Run.env`, `Run.env_options`), and
`stamp` tells cheaply (names, sizes, modification times) whether a run's files have changed
since it was read, so a running trainer's new steps can be picked up (`reload`).

A file of a run that cannot be read (metrics.json, sweep.json or config.json not a JSON object,
lines of metrics.jsonl that are not metrics) is skipped and said so (`Run.skipped`, `Skipped`):
the run opens without it.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.files import file_name
from searchgym.viewer.jsonl import MAX_REASONS

Kind = Literal["eval", "train", "sweep", "file"]
_STEP_FILE = re.compile(r"step-(\d+)\.jsonl")
_SKIP_DIRS = {"episodes", "checkpoints", "plots", "tensorboard", "__pycache__"}
_DEPTH = 3


@dataclass(frozen=True)
class Source:
    """One episodes JSONL file: an agent's episodes (eval, sweep) or a training step's sample."""

    run: int
    """Index of its run in the viewer's list."""
    label: str
    """The agent's name, or ``step N`` for a training step."""
    path: Path
    step: int | None = None
    interval: tuple[float, float] | None = None
    """The EM interval its run's metrics.json gives for it, if any."""


@dataclass(frozen=True)
class Skipped:
    """A file of a run the viewer could not read, or the malformed lines of one it skipped."""

    run: int
    """Index of its run in the viewer's list."""
    path: Path
    lines: int | None
    """How many malformed lines were skipped; None: the whole file was."""
    reasons: tuple[str, ...]
    """Why: the file's (``is not valid JSON (…)``), or the first few lines' (``line 4: turns is
    a number, not a list``)."""

    @property
    def message(self) -> str:
        """One sentence for the reader.

        >>> Skipped(0, Path("/nowhere/x.jsonl"), 5, ("line 4: not JSON", "line 7: turn 1 is null")).message
        '5 malformed lines skipped in /nowhere/x.jsonl: line 4: not JSON; line 7: turn 1 is null; …'
        """
        if self.lines is None:
            return f"{_shown(self.path)} skipped: it {'; '.join(self.reasons)}"
        more = "; …" if self.lines > len(self.reasons) else ""
        s = "" if self.lines == 1 else "s"
        return (
            f"{self.lines} malformed line{s} skipped in {_shown(self.path)}: {'; '.join(self.reasons)}{more}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "path": str(self.path), "lines": self.lines, "reasons": list(self.reasons),
                "message": self.message}  # fmt: skip


def _shown(path: Path) -> str:
    """``path`` as the reader named it: relative to the working directory when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class Unreadable(ConfigError):
    """A run's file that is not what it should be; ``reason`` says why (``is not valid JSON``)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path, self.reason = path, reason


@dataclass
class Run:
    name: str
    kind: Kind
    path: Path
    sources: list[Source] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    """metrics.json of an eval run, sweep.json of a sweep."""
    curves: list[dict[str, float | None]] = field(default_factory=list)
    """The rows of a training run's metrics.jsonl."""
    env: str | None = None
    """The env id the run played, as its metrics.json, sweep.json or config.json records it."""
    env_options: dict[str, Any] = field(default_factory=dict)
    """What the env was made with, as recorded: eval's and sweep's ``env_kwargs`` (and eval's
    ``simulator``); a training run's ``split``, ``max_turns``, ``env_kwargs`` and ``rewards``."""
    skipped: list[Skipped] = field(default_factory=list)
    """Its files (other than episodes) that could not be read, and lines of metrics.jsonl."""


def discover(paths: Sequence[str | os.PathLike]) -> list[Run]:
    """Every run under ``paths``, in the order given (a directory's runs sorted by path); each
    run's name is its directory's name, with parent folders added until names are unique."""
    found: list[tuple[Path, Kind]] = []
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise DataNotFoundError(f"{path} does not exist; give an eval, train or sweep run directory")
        before = len(found)
        if path.is_file():
            if path.suffix != ".jsonl":
                raise ConfigError(f"{path} is not a .jsonl file of episodes; give it or its run directory")
            found.append((path, "file"))
        else:
            _walk(path, _DEPTH, found)
        if len(found) == before:
            raise DataNotFoundError(
                f"{path} holds no run: expected metrics.json and AGENT.jsonl (searchgym eval --out), "
                "metrics.jsonl or episodes/step-NNNNNN.jsonl (searchgym train --run-dir), or sweep.json "
                "(searchgym sweep --out)"
            )
    unique = list(dict.fromkeys(found))
    names = _names([p for p, _ in unique])
    return [_load(i, name, path, kind) for i, (name, (path, kind)) in enumerate(zip(names, unique))]


def _kind(directory: Path) -> Kind | None:
    if (directory / "sweep.json").is_file():
        return "sweep"
    if (directory / "metrics.json").is_file():
        return "eval"
    if (directory / "metrics.jsonl").is_file() or (directory / "episodes").is_dir():
        return "train"
    return None


def _walk(directory: Path, depth: int, found: list[tuple[Path, Kind]]) -> None:
    kind = _kind(directory)
    if kind is not None:
        found.append((directory.resolve(), kind))
    if depth == 0:
        return
    try:
        children = sorted(p for p in directory.iterdir() if p.is_dir() and p.name not in _SKIP_DIRS)
    except OSError:  # a folder that cannot be listed holds no run the viewer can open
        return
    for child in children:
        _walk(child, depth - 1, found)


def _names(paths: list[Path]) -> list[str]:
    names = [p.stem if p.is_file() else p.name for p in paths]
    for up in range(1, 8):
        clashes = {n for n in names if names.count(n) > 1}
        if not clashes:
            break
        names = ["/".join(p.parts[-up - 1 :]) if n in clashes else n for n, p in zip(names, paths)]
    return names


def reload(index: int, run: Run) -> Run:
    """``run`` (the ``index``-th) read again from its files."""
    return _load(index, run.name, run.path, run.kind)


def stamp(run: Run) -> tuple[tuple[str, int, int], ...]:
    """What ``run``'s files are now: name, size and modification time of each file `reload`
    reads (a missing one with size -1); when it changes, the run has. One ``stat`` per file and
    one listing of the run's folder (of a training run's episodes/)."""
    if run.kind == "file":
        names = [run.path]
    elif run.kind == "train":
        names = [run.path / "metrics.jsonl", run.path / "config.json"]
        episodes = run.path / "episodes"
        if episodes.is_dir():
            names += sorted(p for p in episodes.iterdir() if _STEP_FILE.fullmatch(p.name))
    else:
        names = [run.path / ("sweep.json" if run.kind == "sweep" else "metrics.json")]
        names += sorted(run.path.glob("*.jsonl"))
    return tuple(_stat(p) for p in names)


def _stat(path: Path) -> tuple[str, int, int]:
    try:
        st = path.stat()
    except OSError:
        return str(path), -1, 0
    return str(path), st.st_size, st.st_mtime_ns


def _load(index: int, name: str, path: Path, kind: Kind) -> Run:
    run = Run(name, kind, path)

    def read(file: Path) -> dict[str, Any]:  # {} where it cannot be read: said in run.skipped
        try:
            return _read_json(file)
        except Unreadable as e:
            run.skipped.append(Skipped(index, file, None, (e.reason,)))
            return {}

    if kind == "file":
        run.sources = [Source(index, path.stem, path)]
        run.env, run.env_options = _env_beside(path)
    elif kind == "train":
        run.curves, bad = read_curves(path / "metrics.jsonl", index)
        if bad is not None:
            run.skipped.append(bad)
        if (path / "config.json").is_file():
            run.env, run.env_options = _train_env(read(path / "config.json"))
        steps = [(int(m.group(1)), p) for p in (path / "episodes").glob("step-*.jsonl")
                 if (m := _STEP_FILE.fullmatch(p.name))]  # fmt: skip
        run.sources = [Source(index, f"step {s}", p, step=s) for s, p in sorted(steps)]
    else:
        meta_file = path / ("sweep.json" if kind == "sweep" else "metrics.json")
        run.metrics = read(meta_file)
        if kind == "sweep":
            run.metrics = _sweep_report(
                run.metrics, lambda why: run.skipped.append(Skipped(index, meta_file, None, (why,)))
            )
        run.env, run.env_options = _eval_env(run.metrics)
        agents = run.metrics.get("agents") if isinstance(run.metrics.get("agents"), dict) else {}
        by_file = {file_name(a): a for a in agents}
        for p in sorted(path.glob("*.jsonl")):
            label = by_file.get(p.stem, p.stem)
            stats = agents.get(label)
            stats = stats.get("all", stats) if isinstance(stats, dict) else None
            run.sources.append(Source(index, label, p, interval=_interval(stats)))
    return run


def _sweep_report(report: dict[str, Any], skip: Callable[[str], None]) -> dict[str, Any]:
    """A sweep.json as the sweep page reads it: ``agents`` an object of objects, ``weights`` a
    list of objects; a key that is not is left out, and ``skip`` told why."""
    shapes = {"agents": (dict, "an object of objects"), "weights": (list, "a list of objects")}
    for key, (kind, wanted) in shapes.items():
        value = report.get(key)
        if value is None:
            continue
        items = value.values() if isinstance(value, dict) else value
        if not isinstance(value, kind) or not all(isinstance(item, dict) for item in items):
            skip(f"has {key} that are not {wanted}; the sweep page leaves them out")
            report = {k: v for k, v in report.items() if k != key}
    return report


def _eval_env(report: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The env of an eval's metrics.json or a sweep's sweep.json: ``env``, ``env_kwargs`` and
    eval's ``simulator`` (the model that plays the search engine)."""
    env, kwargs = report.get("env"), report.get("env_kwargs")
    options = dict(kwargs) if isinstance(kwargs, dict) else {}
    if report.get("simulator"):
        options["simulator"] = report["simulator"]
    return (None if env is None else str(env)), options


def _train_env(config: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The env a training run's config.json made its rollouts with, as
    ``searchgym.agents.train.schedule.make_env`` makes it: split, turn limit, kwargs, rewards."""
    env, kwargs = config.get("env"), config.get("env_kwargs")
    options = {name: config[key] for key, name in (("train_split", "split"), ("max_turns", "max_turns"))
               if config.get(key) is not None}  # fmt: skip
    options.update(kwargs if isinstance(kwargs, dict) else {})
    if config.get("rewards"):
        options["rewards"] = config["rewards"]
    return (None if env is None else str(env)), options


def _env_beside(path: Path) -> tuple[str | None, dict[str, Any]]:
    """The env of the run a lone episodes file sits in (an eval's or sweep's folder, or a
    training run's episodes/), if that run records one."""
    found = [(path.parent / "sweep.json", _eval_env), (path.parent / "metrics.json", _eval_env)]
    if path.parent.name == "episodes":
        found.append((path.parent.parent / "config.json", _train_env))
    for meta, read in found:
        if meta.is_file():
            try:
                return read(_read_json(meta))
            except ConfigError:  # a neighbour's file is only a hint: the episodes still open
                continue
    return None, {}


def env_label(env: str | None, options: dict[str, Any]) -> str:
    """An env id with the options it was made with, as the viewer names a run's env.

    >>> env_label("searchgym/FictionalQA-BM25-v0", {"split": "dev", "hops": [2]})
    'searchgym/FictionalQA-BM25-v0 (split=dev, hops=[2])'
    >>> env_label(None, {})
    'env not recorded'
    """
    if env is None:
        return "env not recorded"
    shown = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in options.items())
    return f"{env} ({shown})" if shown else env


def _interval(stats: Any) -> tuple[float, float] | None:
    """An EM interval in an agent's metrics: ``em_low`` and ``em_high``, or ``em_ci: [low, high]``."""
    if not isinstance(stats, dict):
        return None
    pair = stats.get("em_ci") or (stats.get("em_low"), stats.get("em_high"))
    if isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(x, (int, float)) for x in pair):
        return float(pair[0]), float(pair[1])
    return None


def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object in the file ``path``, or `Unreadable` saying why it is not one."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as e:
        raise Unreadable(path, f"cannot be read ({e.strerror or e})") from None
    except RecursionError:
        raise Unreadable(path, "is nested too deeply to be read") from None
    except ValueError as e:
        raise Unreadable(path, f"is not valid JSON ({e}); was it written completely?") from None
    if not isinstance(data, dict):
        raise Unreadable(path, "should hold a JSON object")
    return data


def read_curves(path: Path, run: int = 0) -> tuple[list[dict[str, float | None]], Skipped | None]:
    r"""The rows of a training run's metrics.jsonl (``{"step": int, "ns/name": value}``), each
    non-finite value as None; a missing file gives no rows, a last line cut short is skipped.
    Second, the lines that are not such a row (or the file, if it cannot be read), or None.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "metrics.jsonl"
    >>> _ = path.write_text('{"step": 1, "loss/kl": 0.5}\n[2]\n{"step": 3, "loss/kl": Infinity}\n{"st')
    >>> rows, skipped = read_curves(path)
    >>> rows
    [{'step': 1, 'loss/kl': 0.5}, {'step': 3, 'loss/kl': None}]
    >>> skipped.lines, skipped.reasons
    (1, ('line 2: not an object with an integer step',))
    """
    if not path.is_file():
        return [], None
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as e:
        return [], Skipped(run, path, None, (f"cannot be read ({e.strerror or e})",))
    rows, bad, reasons = [], 0, []
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            reason = _not_metrics(row)
        except (ValueError, RecursionError) as e:
            if i == last:  # a line still being written
                break
            reason = f"not JSON ({e})" if isinstance(e, ValueError) else "nested too deeply"
        if reason is None:
            rows.append({k: _finite(v) for k, v in row.items()})
            continue
        bad += 1
        if len(reasons) < MAX_REASONS:
            reasons.append(f"line {i + 1}: {reason}")
    return rows, (Skipped(run, path, bad, tuple(reasons)) if bad else None)


def _not_metrics(row: Any) -> str | None:
    """Why ``row`` is not a line of metrics.jsonl (an integer step, and numbers or nulls), or None."""
    if not isinstance(row, dict) or type(row.get("step")) is not int:
        return "not an object with an integer step"
    for key, value in row.items():
        if value is not None and type(value) not in (int, float):
            return f"{key} is not a number"
        if type(value) is int and value.bit_length() > 1023:
            return f"{key} is a number too large to plot"
    return None


def _finite(value: Any) -> Any:
    return value if not isinstance(value, float) or math.isfinite(value) else None
