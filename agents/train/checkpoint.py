"""Training checkpoints that a killed run resumes from exactly.

A checkpoint is one directory, ``RUN_DIR/checkpoints/step-{step:06d}/``, laid out like a
transformers checkpoint so that it also loads as a model (``HFPolicy(path)``, ``hf:PATH``)::

    config.json, model.safetensors, tokenizer files   # save_pretrained (a plain nn.Module: model.safetensors)
    optimizer.pt, scheduler.pt                        # state_dicts
    rng.pt                                            # python random, numpy global, torch CPU and CUDA
    state.json                                        # step, data_state, extra and the manifest; written last

It is written into a hidden temporary directory beside the final one, every file is fsync'ed, and
only then is the directory renamed into place, so a crash at any moment leaves the previous
checkpoints intact and nothing half-written that `latest_checkpoint` would pick.

``state.json`` is the manifest too, as ``searchgym.json`` is an index's: ``files`` gives the size
of every other file, and ``sha256`` the digest of each under 16 MiB (config, tokenizer, random
state, scheduler). The weights and optimizer state are checked by size alone, which catches the
truncated or partial copies seen in practice; hashing them would read gigabytes on every save and
resume. Every ``*.safetensors`` file must also open (its header covers the file exactly). A
checkpoint that fails any of this is skipped by `latest_checkpoint`, which says why, and refused
by `load_checkpoint`. One written before manifests existed (no ``files``) is taken if its weights
open and its optimizer and random state are there.

    path = save_checkpoint(run_dir, step, model=model, optimizer=opt, data_state={"next_task": i})
    state = load_checkpoint(latest_checkpoint(run_dir), model=model, optimizer=opt)
    step, data_state = state["step"], state["data_state"]

Restoring the global random generators is the point of an exact resume, so `load_checkpoint`
sets them (the one place library code does); saving only reads them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import numbers
import os
import random
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from searchgym.agents.policies.models import hub_progress
from searchgym.errors import ConfigError, DataNotFoundError, SearchGymError

logger = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
MARKER = "state.json"
_STEP_DIR = re.compile(r"step-(\d{6,})")
_SAFETENSORS = "model.safetensors"
_SAFETENSORS_INDEX = "model.safetensors.index.json"
_HASHED_UP_TO = 16 * 2**20  # bytes: files this small get a sha256 in the manifest


def save_checkpoint(
    run_dir: str | os.PathLike,
    step: int,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    tokenizer: Any = None,
    scheduler: Any = None,
    data_state: dict[str, Any],
    extra: dict[str, Any] | None = None,
    keep: int | None = 2,
) -> Path:
    """Write ``RUN_DIR/checkpoints/step-{step:06d}/`` atomically and return its path.

    ``data_state`` (where the run is in its task stream) and ``extra`` (e.g. the config) must be
    JSON-serialisable. Afterwards only the newest ``keep`` intact checkpoints remain (None keeps all)
    besides step 0, which is never pruned: it is the starting point (in GRPO, the policy after its
    warm start, which the KL term is measured against). Any checkpoint of a later step is removed:
    it belongs to a timeline this run has abandoned (resumed from an earlier one), and
    `latest_checkpoint` must not go back to it. Under ``accelerate`` call it on the main process
    only, with the unwrapped model.
    """
    if not isinstance(step, numbers.Integral) or isinstance(step, bool) or step < 0:
        raise ConfigError(f"step must be a non-negative integer, got {step!r}")
    step = int(step)
    if keep is not None and (not isinstance(keep, int) or keep < 1):
        raise ConfigError(f"keep must be a positive integer or None (keep all), got {keep!r}")
    state = _state(step, data_state, extra)
    final = checkpoint_dir(run_dir, step)
    root = final.parent
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".tmp-{final.name}-"))
    try:
        _save_model(model, tokenizer, tmp)
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        if scheduler is not None:
            torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        torch.save(_rng_state(), tmp / "rng.pt")
        _write_state(tmp, state)
        _fsync_tree(tmp)
        problem = _problem(tmp)
        if problem is not None:  # before an older checkpoint can be pruned for it
            raise SearchGymError(
                f"the checkpoint of step {step} did not save intact ({problem}); the earlier ones are "
                "untouched: check the disk's free space and health, then resume"
            )
        _move_into_place(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _prune(root, final, keep)
    logger.info("saved checkpoint %s", final)
    return final


def remove_unfinished_saves(run_dir: str | os.PathLike) -> list[Path]:
    """Delete what saves killed midway left under ``RUN_DIR/checkpoints`` and return it: the
    hidden temporary folder of a checkpoint never finished (``.tmp-step-*``, as large as a
    checkpoint), and the copy of a step that was being saved again (``.old-step-*``), except
    where that step's folder is missing: the copy is then its only one, and is put back. A
    warning names what was removed and its size.

    Call it where no save into ``run_dir`` can be under way, as `train` does at the start of a
    run (fresh or resumed) once `claim_run_dir` holds the run directory: the lock keeps other
    processes out, and within a process nothing saves concurrently, since `save_checkpoint`
    runs to its end in the training loop, on the main process only. Any temporary folder found
    then is a dead one. (`save_checkpoint` also deletes them once its own save is in place.)
    """
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    removed = sorted(p for p in root.iterdir() if p.name.startswith((".tmp-step-", ".old-step-")))
    for path in removed:
        if path.name.startswith(".old-"):
            _put_back(path, root)
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        shutil.rmtree(path, ignore_errors=True)
        logger.warning(
            "removed %s (%.1f MB), left by a checkpoint save that did not finish", path, size / 1e6
        )
    return removed


def _put_back(old: Path, root: Path) -> None:
    """Move the intact checkpoint in ``old`` (``.old-step-N-*/step-N``) back to ``root/step-N``
    where that is missing: a save of step N moved it aside and was killed before its own
    checkpoint took the place."""
    for copy in old.iterdir():
        final = root / copy.name
        if _STEP_DIR.fullmatch(copy.name) and not final.exists() and _problem(copy) is None:
            os.replace(copy, final)
            logger.warning("put back %s, moved aside by a save of the same step that did not finish", final)


def checkpoint_dir(run_dir: str | os.PathLike, step: int) -> Path:
    """Where the checkpoint of ``step`` lives (whether or not it exists)."""
    return Path(run_dir) / CHECKPOINTS / f"step-{step:06d}"


def load_weights(path: str | os.PathLike, model: torch.nn.Module) -> None:
    """Copy only the model weights of checkpoint ``path`` into ``model`` (no optimizer, no RNG)."""
    _load_model(model, Path(path))


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The complete and intact checkpoint of the highest step under ``RUN_DIR/checkpoints``, or
    None; each newer one it skips, it names in a warning that says why."""
    for _, path in reversed(_step_dirs(Path(run_dir) / CHECKPOINTS)):
        problem = _problem(path)
        if problem is None:
            return path
        logger.warning("skipping checkpoint %s: %s", path, problem)
    return None


def load_checkpoint(
    path: str | os.PathLike,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
) -> dict[str, Any]:
    """Restore ``path`` in place: model weights, optimizer and scheduler state (where given) and
    the global random generators. Returns ``{"step", "data_state", "extra", "path"}``.

    Pass the model unwrapped (``accelerator.unwrap_model``) and on the device it trains on;
    the optimizer must have been built over that model's parameters, as when it was saved.
    """
    path = Path(path)
    problem = _problem(path)
    if problem is not None:
        raise DataNotFoundError(f"{path} is not a complete checkpoint ({problem}); see latest_checkpoint()")
    state = json.loads((path / MARKER).read_text(encoding="utf-8"))
    _load_model(model, path)
    if optimizer is not None:
        optimizer.load_state_dict(_torch_load(path / "optimizer.pt"))
    if scheduler is not None:
        if not (path / "scheduler.pt").is_file():
            raise ConfigError(f"{path} was saved without a scheduler; resume without one or start over")
        scheduler.load_state_dict(_torch_load(path / "scheduler.pt"))
    elif (path / "scheduler.pt").is_file() and optimizer is not None:
        logger.warning("%s holds a scheduler state but no scheduler was given to restore it", path)
    _set_rng_state(_torch_load(path / "rng.pt"))
    return {"step": state["step"], "data_state": state["data_state"], "extra": state["extra"], "path": path}


def _state(step: int, data_state: dict[str, Any], extra: dict[str, Any] | None) -> dict[str, Any]:
    state = {"step": step, "data_state": data_state, "extra": extra or {}}
    try:
        json.dumps(state)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"data_state and extra must be JSON-serialisable: {e}") from e
    return state


# --- model weights ---------------------------------------------------------------------------


def _save_model(model: torch.nn.Module, tokenizer: Any, directory: Path) -> None:
    """``save_pretrained`` (safetensors, no progress bar) where the model has it, else the plain
    state dict as ``model.safetensors``."""
    if hasattr(model, "save_pretrained"):
        with hub_progress(False):  # no "Writing model shards" bar inside a trainer's own bar
            model.save_pretrained(directory, safe_serialization=True)
    else:
        from safetensors.torch import save_model

        save_model(model, str(directory / _SAFETENSORS))
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)


def _load_model(model: torch.nn.Module, directory: Path) -> None:
    """Copy the saved weights into ``model``; every key must match, except a tied weight that
    save_pretrained left out because it shares its tensor with one that was saved."""
    from safetensors.torch import load_file

    if (directory / _SAFETENSORS).is_file():
        files = [directory / _SAFETENSORS]
    elif (directory / _SAFETENSORS_INDEX).is_file():
        index = json.loads((directory / _SAFETENSORS_INDEX).read_text(encoding="utf-8"))
        files = [directory / name for name in sorted(set(index["weight_map"].values()))]
    else:
        raise DataNotFoundError(f"{directory} holds no {_SAFETENSORS} or {_SAFETENSORS_INDEX}")
    saved: dict[str, torch.Tensor] = {}
    for file in files:
        saved.update(load_file(str(file)))
    current = model.state_dict()
    loaded_storage = {current[name].data_ptr() for name in saved if name in current}
    missing = [n for n in current if n not in saved and current[n].data_ptr() not in loaded_storage]
    unexpected = [n for n in saved if n not in current]
    reshaped = [n for n in current if n in saved and saved[n].shape != current[n].shape]
    if missing or unexpected or reshaped:  # checked before anything is copied into the model
        raise ConfigError(
            f"{directory} does not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}, "
            f"other shapes {reshaped[:5]}; is it a checkpoint of this model?"
        )
    model.load_state_dict(saved, strict=False)


# --- random generators ---------------------------------------------------------------------------


def _rng_state() -> dict[str, Any]:
    """The global generators a training step draws from, in types ``torch.load(weights_only=True)``
    reads back (the numpy key as a tensor, not an ndarray)."""
    np_state = np.random.get_state(legacy=False)
    return {
        "python": random.getstate(),
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    np_state = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": np_state["bit_generator"],
            "state": {"key": np_state["key"].numpy().astype(np.uint32), "pos": np_state["pos"]},
            "has_gauss": np_state["has_gauss"],
            "gauss": np_state["gauss"],
        }
    )
    torch.set_rng_state(state["torch"])
    if state["cuda"]:
        if torch.cuda.is_available() and torch.cuda.device_count() == len(state["cuda"]):
            torch.cuda.set_rng_state_all(state["cuda"])
        else:
            logger.warning(
                "checkpoint holds the random state of %d CUDA devices, this machine has %d: not restored",
                len(state["cuda"]),
                torch.cuda.device_count() if torch.cuda.is_available() else 0,
            )


def _torch_load(path: Path) -> Any:
    if not path.is_file():
        raise DataNotFoundError(f"{path} is missing; the checkpoint is incomplete")
    return torch.load(path, map_location="cpu", weights_only=True)


# --- files ---------------------------------------------------------------------------------------


def _write_state(directory: Path, state: dict[str, Any]) -> None:
    """Write ``state.json``, with the manifest of every other file in ``directory``: call it last."""
    files, digests = {}, {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MARKER):
        name, size = path.relative_to(directory).as_posix(), path.stat().st_size
        files[name] = size
        if size <= _HASHED_UP_TO:
            digests[name] = _sha256(path)
    manifest = {"files": files, "sha256": digests}
    (directory / MARKER).write_text(json.dumps(state | manifest, indent=2) + "\n", encoding="utf-8")


def _problem(directory: Path) -> str | None:
    """Why ``directory`` is not a complete and intact checkpoint, or None when it is."""
    try:
        state = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"no {MARKER}, its manifest"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return f"{MARKER} is unreadable ({e})"
    if not isinstance(state, dict):
        return f"{MARKER} holds no JSON object"
    if "files" not in state:  # written before manifests: the files a resume needs must be there
        legacy = {"optimizer.pt", "rng.pt"} - {p.name for p in directory.iterdir()}
        if legacy:
            return f"{', '.join(sorted(legacy))} missing (a checkpoint without a manifest)"
    for name, size in state.get("files", {}).items():
        file = directory / name
        if not file.is_file():
            return f"{name} is missing"
        if file.stat().st_size != size:
            return f"{name} is {file.stat().st_size} bytes, not {size} (truncated or altered)"
    for name, digest in state.get("sha256", {}).items():
        if _sha256(directory / name) != digest:
            return f"{name} has other contents than when it was saved (sha256 differs)"
    from safetensors import SafetensorError, safe_open

    weights = sorted(directory.glob("*.safetensors"))
    if not weights:
        return f"no {_SAFETENSORS}"
    for file in weights:
        try:
            with safe_open(str(file), "pt"):
                pass
        except (SafetensorError, OSError) as e:
            return f"{file.name} is unreadable ({e})"
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def _step_dirs(root: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint directory under ``root``, complete or not, by step."""
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.fullmatch(p.name))]
    return sorted((step, path) for step, path in found if path.is_dir())


def _move_into_place(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` to ``final``; an existing ``final`` (the same step saved again) is moved
    aside first and deleted after, so at no moment does a half-written ``final`` exist."""
    old = None
    if final.exists():
        old = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".old-{final.name}-"))
        os.replace(final, old / final.name)
    os.replace(tmp, final)
    _fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _prune(root: Path, newest: Path, keep: int | None) -> None:
    """Remove checkpoints after ``newest`` (which `save_checkpoint` checked is intact), all but the
    ``keep`` newest up to it (step 0 stays), and temporary directories that a crashed save left
    behind. Only intact checkpoints count towards ``keep``; older broken ones are removed."""
    found = _step_dirs(root)
    position = [path for _, path in found].index(newest)
    stale = [path for _, path in found[position + 1 :]]
    if stale:
        logger.warning("removing checkpoints after %s: %s", newest.name, ", ".join(p.name for p in stale))
    older = [path for step, path in found[:position] if step != 0]
    doomed = list(stale)
    if keep is not None:
        intact = [path for path in older if _problem(path) is None]
        broken = [path for path in older if path not in intact]
        if broken:
            logger.warning("removing broken checkpoints: %s", ", ".join(p.name for p in broken))
        doomed += broken + intact[: max(len(intact) + 1 - keep, 0)]
    doomed += [p for p in root.iterdir() if p.name.startswith((".tmp-", ".old-"))]
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)


def _fsync_tree(directory: Path) -> None:
    """Flush every file under ``directory``, and the directories themselves, to disk."""
    for parent, _, files in os.walk(directory):
        for name in files:
            fd = os.open(os.path.join(parent, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(parent))


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # Windows cannot open a directory; its renames are durable enough
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
