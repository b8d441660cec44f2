"""Config field metadata: an option's one-line help, whether it changes a tensor shape, its allowed values
and its range.

`doc("...")` goes into `dataclasses.field(metadata=...)`. It is the one source for `ddppo config --explain KEY`
and for validation: `ddppo.config.SHAPE_KEYS` (what a resume may not change) is every field marked
`shape=True`, and `ddppo.config.checks` refuses a value outside `choices` or the bounds (gt/ge/lt/le).
"""

from __future__ import annotations

from typing import Any, Sequence

HELP = "help"
SHAPE = "shape"
CHOICES = "choices"
BOUNDS = "bounds"  # {"gt"|"ge"|"lt"|"le": number}
HINT = "hint"


def doc(help: str, shape: bool = False, choices: Sequence[Any] | None = None, gt: float | None = None,
        ge: float | None = None, lt: float | None = None, le: float | None = None, hint: str = "") -> dict:
    """Field metadata: `field(default=..., metadata=doc("what it is", shape=True, ge=0))`."""
    bounds = {name: value for name, value in (("gt", gt), ("ge", ge), ("lt", lt), ("le", le)) if value is not None}
    return {HELP: help, SHAPE: shape, CHOICES: tuple(choices) if choices else None, BOUNDS: bounds, HINT: hint}


def fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def bound_problem(value: Any, bounds: dict) -> str | None:
    """'must be ...' for a value outside `bounds`, None inside (the wording the config errors use)."""
    low = ("(", bounds["gt"], value > bounds["gt"]) if "gt" in bounds else \
        ("[", bounds["ge"], value >= bounds["ge"]) if "ge" in bounds else None
    high = (")", bounds["lt"], value < bounds["lt"]) if "lt" in bounds else \
        ("]", bounds["le"], value <= bounds["le"]) if "le" in bounds else None
    if (low is None or low[2]) and (high is None or high[2]):
        return None
    if low and high:
        return f"must be in {low[0]}{fmt(low[1])}, {fmt(high[1])}{high[0]}"
    side = low or high
    op = {"(": ">", "[": ">=", ")": "<", "]": "<="}[side[0]]
    return f"must be {op} {fmt(side[1])}"


def field_problems(obj: Any, fields: Sequence[Any], prefix: str = "") -> list[str]:
    """Values of `obj`'s `fields` (dataclass fields carrying `doc` metadata) outside their choices or bounds."""
    out = []
    for f in fields:
        value = getattr(obj, f.name)
        choices, bounds, hint = f.metadata.get(CHOICES), f.metadata.get(BOUNDS), f.metadata.get(HINT)
        if choices and value not in choices:
            out.append(f"{prefix}{f.name}={value!r} must be one of {', '.join(map(str, choices))}")
        elif bounds and isinstance(value, (int, float)) and not isinstance(value, bool):
            problem = bound_problem(value, bounds)
            if problem:
                out.append(f"{prefix}{f.name}={value} {problem}" + (f"; {hint}" if hint else ""))
    return out
