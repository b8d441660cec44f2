"""Config field metadata: an option's one-line help, whether it changes a tensor shape, its allowed values
and its range; the one validation idiom of every config section, ddppo's and the environments' alike.

`doc("...")` goes into `dataclasses.field(metadata=...)`. It is the one source for `ddppo config --explain KEY`
and for validation: `ddppo.config.SHAPE_KEYS` (what a resume may not change) is every field marked
`shape=True`, and `ddppo.config.checks` refuses a value outside `choices` or the bounds (gt/ge/lt/le).

An environment's option section (a frozen dataclass, `env.<section>`) declares each field's choices and range
here, and keeps in a `problems()` method only what one field's metadata cannot say: rules across its fields
(`min_depth < max_depth`) and values required once the environment is the one chosen (a dataset path). An
environment built without ddppo's config checks refuses its options with `section_problems`, the same messages.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

HELP = "help"
SHAPE = "shape"
CHOICES = "choices"
BOUNDS = "bounds"  # {"gt"|"ge"|"lt"|"le": number}
HINT = "hint"


def doc(help: str, shape: bool = False, choices: Sequence[Any] | None = None, gt: float | None = None,
        ge: float | None = None, lt: float | None = None, le: float | None = None, hint: str = "") -> dict:
    """Field metadata: `field(default=..., metadata=doc("what it is", shape=True, ge=0))`. `choices`: a list or
    tuple, or a live collection of names that grows as modules register theirs (ddppo.user_code.Registry: `in`,
    iteration, and `problem(value, key)` saying why a value is not one)."""
    bounds = {name: value for name, value in (("gt", gt), ("ge", ge), ("lt", lt), ("le", le)) if value is not None}
    kept = tuple(choices) if isinstance(choices, (list, tuple)) else choices
    return {HELP: help, SHAPE: shape, CHOICES: kept or None, BOUNDS: bounds, HINT: hint}


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
        live = getattr(choices, "problem", None)
        if live is not None:
            problem = live(value, f"{prefix}{f.name}")
            if problem:
                out.append(problem)
        elif choices and value not in choices:
            out.append(f"{prefix}{f.name}={value!r} must be one of {', '.join(map(str, choices))}"
                       + (f"; {hint}" if hint else ""))
        elif bounds and isinstance(value, (int, float)) and not isinstance(value, bool):
            problem = bound_problem(value, bounds)
            if problem:
                out.append(f"{prefix}{f.name}={value} {problem}" + (f"; {hint}" if hint else ""))
    return out


def rule_problems(options: Any) -> list[str]:
    """An option section's rules across its fields: its `problems()`, where it has one."""
    rules = getattr(options, "problems", None)
    return rules() if rules else []


def section_problems(options: Any) -> list[str]:
    """Every problem of one option section: its fields' declared choices and ranges, then its rules across
    fields; what an environment built without ddppo's config checks refuses."""
    return field_problems(options, dataclasses.fields(options)) + rule_problems(options)
