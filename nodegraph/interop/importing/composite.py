"""Modules of other libraries that are a short chain of library blocks.

timm's `BatchNormAct2d` is a BatchNorm2d followed by its activation (and a dropout, none by
default); its `LayerNorm2d` is a LayerNorm over the channels of an (N, C, H, W) tensor, that
is a permute to channels-last, the LayerNorm and a permute back. Both subclass a torch.nn
norm whose weights they keep, so `nodegraph import` would leave them opaque; `chain` says
which blocks compute them instead, with each block's params and the module's weights on
the norm, so the imported graph shows and trains them as blocks. Recognised by the
module's class and attributes, not by its name, so a copy of the class elsewhere maps too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

# (block id, params, weights by param name) for each link, in order
Link = tuple[str, dict[str, Any], dict[str, Any]]


def chain(module: nn.Module, block_of: Callable[[nn.Module], tuple[str, dict] | None]
          ) -> list[Link] | None:
    """The blocks computing `module` one after the other, or None; `block_of` maps a plain
    torch module to its block (`blocks.module_block`)."""
    own = {k: v for k, v in module.state_dict().items() if "." not in k}
    if isinstance(module, nn.BatchNorm2d) and type(module) is not nn.BatchNorm2d and \
            hasattr(module, "act") and hasattr(module, "drop"):  # timm's BatchNormAct2d
        norm = _as(module, nn.BatchNorm2d, block_of)
        if norm is None:
            return None
        links: list[Link] = [(norm[0], norm[1], own)]
        for part in (module.drop, module.act):
            if isinstance(part, nn.Identity):
                continue
            mapped = block_of(part)  # type: ignore[arg-type]
            if mapped is None or any(True for _ in part.parameters()):  # type: ignore[union-attr]
                return None
            links.append((mapped[0], mapped[1], {}))
        return links
    if isinstance(module, nn.LayerNorm) and type(module) is not nn.LayerNorm and \
            len(module.normalized_shape) == 1 and "permute(0, 2, 3, 1)" in _source(module):
        norm = _as(module, nn.LayerNorm, block_of)  # timm's LayerNorm2d: channels last
        if norm is None:
            return None
        return [("layers.Permute", {"dims": [2, 3, 1]}, {}), (norm[0], norm[1], own),
                ("layers.Permute", {"dims": [3, 1, 2]}, {})]
    return None


def _as(module: nn.Module, cls: type[nn.Module], block_of) -> tuple[str, dict] | None:
    """The block of `cls` with the params read from `module` (a subclass of it)."""
    plain = cls.__new__(cls)
    plain.__dict__.update(module.__dict__)  # the same attributes, the plain class
    return block_of(plain)


def _source(module: nn.Module) -> str:
    import inspect

    try:
        return inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return ""
