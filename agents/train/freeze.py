"""Train only the top of a causal LM (``trainable_layers: N``): the last N decoder blocks and the
final norm get gradients; the embeddings (tied to the output head in SmolLM2) and the blocks below
do not. Backward then stops N blocks down and the blocks below run without keeping activations,
so an update costs about a forward plus a backward through N blocks instead of a forward plus
two forwards' worth of backward through all of them, and AdamW keeps state for those blocks alone."""

from __future__ import annotations

import torch

from searchgym.errors import ConfigError

_BLOCK_LISTS = ("layers", "h", "blocks", "layer")
_FINAL_NORMS = ("norm", "ln_f", "final_layernorm", "final_layer_norm")


def decoder_blocks(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.ModuleList]:
    """The decoder (``model.get_decoder()``, or ``model.model`` / ``model.transformer``) and its
    list of blocks, for the architectures transformers names ``layers``, ``h``, ``blocks`` or
    ``layer``."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    for candidate in (decoder, getattr(model, "model", None), getattr(model, "transformer", None)):
        for name in _BLOCK_LISTS:
            blocks = getattr(candidate, name, None)
            if isinstance(blocks, torch.nn.ModuleList) and len(blocks):
                return candidate, blocks
    raise ConfigError(
        f"trainable_layers: cannot find the decoder blocks of {type(model).__name__} (looked for "
        f"{', '.join(_BLOCK_LISTS)} under get_decoder(), .model and .transformer); set trainable_layers: 0 "
        f"to train every parameter"
    )


def top_modules(model: torch.nn.Module, n: int) -> list[torch.nn.Module]:
    """The last ``n`` decoder blocks of ``model`` and its final norm; a `ConfigError` if it has
    fewer blocks."""
    decoder, blocks = decoder_blocks(model)
    if not 1 <= n <= len(blocks):
        raise ConfigError(
            f"trainable_layers must be between 1 and the model's {len(blocks)} decoder blocks (0 trains "
            f"all parameters), got {n}"
        )
    top = [blocks[i] for i in range(len(blocks) - n, len(blocks))]
    return top + [getattr(decoder, name) for name in _FINAL_NORMS if hasattr(decoder, name)]


def freeze_all_but(model: torch.nn.Module, trainable: list[torch.nn.Module]) -> int:
    """Stop gradients to every parameter of ``model`` outside ``trainable``; returns how many
    parameters still get them."""
    model.requires_grad_(False)
    for module in trainable:
        module.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
