"""Config field metadata: an option's one-line help, whether it changes a tensor shape, its allowed values,
its range, what each item of a list must be, and whether an environment's option is required; the one
validation idiom of every config section, ddppo's and the environments' alike.

A leaf: it imports nothing of the project, so both ddppo.config and envs/ (which imports nothing else of ddppo but
the data package ddppo.configs) may import it (tests/infra/test_import_graph.py `LEAVES`).

`doc("...")` goes into `dataclasses.field(metadata=...)`. It is the one source for `ddppo config --explain KEY`
and for validation: `ddppo.config.SHAPE_KEYS` (what a resume may not change) is every field marked
`shape=True`, and `ddppo.config.checks` refuses a value outside `choices` or the bounds (gt/ge/lt/le), or a
list with an item its `each` check refuses, whichever environment is chosen (`field_problems`).

An environment's option section (a frozen dataclass, `env.<section>`) declares each field's rules here; a field
marked `required` must be non-empty once that environment is the one chosen (`required_problems`; a dataset
path). A `problems()` method keeps only what one field's metadata cannot say: rules across its fields
(`min_depth < max_depth`). An environment built without ddppo's config checks refuses its options with
`section_problems`, the same messages.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

HELP = "help"
SHAPE = "shape"
CHOICES = "choices"
BOUNDS = "bounds"  # {"gt"|"ge"|"lt"|"le": number}
HINT = "hint"
EACH = "each"  # item -> "must be ..." or None, for every item of a list
REQUIRED = "required"  # what a required option must name ("" = optional)


def doc(help: str, shape: bool = False, choices: Sequence[Any] | None = None, gt: float | None = None,
        ge: float | None = None, lt: float | None = None, le: float | None = None, hint: str = "",
        each: Callable[[Any], str | None] | None = None, required: str = "") -> dict:
    """Field metadata: `field(default=..., metadata=doc("what it is", shape=True, ge=0))`. `choices`: a list or
    tuple, or a live collection of names that grows as modules register theirs (ddppo.user_code.Registry: `in`,
    iteration, and `problem(value, key)` saying why a value is not one). `each`: for a list, a check of one item
    returning what it must be ("must be KEY=VALUE strings") or None. `required`: an environment's option that must
    be non-empty once that environment is the one chosen, saying what it names ("a habitat-lab task config
    file")."""
    bounds = {name: value for name, value in (("gt", gt), ("ge", ge), ("lt", lt), ("le", le)) if value is not None}
    kept = tuple(choices) if isinstance(choices, (list, tuple)) else choices
    return {HELP: help, SHAPE: shape, CHOICES: kept or None, BOUNDS: bounds, HINT: hint, EACH: each,
            REQUIRED: required}


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


def item_problems(key: str, items: Any, each: Callable[[Any], str | None]) -> list[str]:
    """`key=[the items each refuses] must be ...`, one line per different reason (in the order first met)."""
    refused: dict[str, list] = {}
    for item in items:
        problem = each(item)
        if problem:
            refused.setdefault(problem, []).append(item)
    return [f"{key}={bad!r} {problem}" for problem, bad in refused.items()]


def field_problems(obj: Any, fields: Sequence[Any], prefix: str = "") -> list[str]:
    """Values of `obj`'s `fields` (dataclass fields carrying `doc` metadata) outside their choices or bounds, and
    lists with items their `each` check refuses."""
    out = []
    for f in fields:
        value = getattr(obj, f.name)
        if f.metadata.get(EACH) and isinstance(value, (list, tuple)):
            out += item_problems(f"{prefix}{f.name}", value, f.metadata[EACH])
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


def required_problems(options: Any) -> list[str]:
    """An option section's `required` fields left empty: asked once its environment is the one chosen."""
    return [f"{f.name}={getattr(options, f.name)!r} must name {f.metadata[REQUIRED]}"
            for f in dataclasses.fields(options) if f.metadata.get(REQUIRED) and not getattr(options, f.name)]


def rule_problems(options: Any) -> list[str]:
    """An option section's rules across its fields: its `problems()`, where it has one."""
    rules = getattr(options, "problems", None)
    return rules() if rules else []


def section_problems(options: Any) -> list[str]:
    """Every problem of one option section: its fields' declared rules, its required fields, then its rules across
    fields; what an environment built without ddppo's config checks refuses."""
    return field_problems(options, dataclasses.fields(options)) + required_problems(options) + rule_problems(options)
