"""Config field metadata: the one-line help of an option and whether it changes a tensor shape.

`doc("...")` goes into `dataclasses.field(metadata=...)`; `ddppo config --explain KEY` shows it, and
`ddppo.config.SHAPE_KEYS` (what a resume may not change) is every field marked `shape=True`.
"""

from __future__ import annotations

HELP = "help"
SHAPE = "shape"


def doc(help: str, shape: bool = False) -> dict:
    """Field metadata: `field(default=..., metadata=doc("what it is", shape=True))`."""
    return {HELP: help, SHAPE: shape}
