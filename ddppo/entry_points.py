"""Installed packages' entry points of one group, sorted by name, on every Python this package supports (3.9's
`importlib.metadata.entry_points()` is a dict of groups; 3.10 on has `select`). A leaf: it imports nothing of the
project, so the CLI (`ddppo.commands`) and the environment registry (`ddppo.env_families`) share it."""

from __future__ import annotations

from typing import Any


def entry_points_of(group: str) -> list[Any]:
    """The entry points of `group`, sorted by name (not loaded)."""
    from importlib.metadata import entry_points

    found = entry_points()
    points = found.select(group=group) if hasattr(found, "select") else found.get(group, ())
    return sorted(points, key=lambda point: point.name)
