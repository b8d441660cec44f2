"""The config schema's placement section: which ranks take which role (ddppo/distributed/placement.py reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ddppo.field_metadata import doc


@dataclass(frozen=True)
class PlacementConfig:
    """Roles on ranks, one key per role: `all`, `""` (no rank) or ranks and inclusive ranges (`0-3,6`); every rank
    takes one role, its collectives run on its role's group. The default is colocated: `train` on every rank."""

    train: str = field(default="all",
                       metadata=doc("the ranks that collect, score and learn, all-reducing gradients among "
                                    "themselves (all: every rank, the colocated default; the only role so far, so "
                                    "it must hold every rank)"))
