"""What each key means: `ddppo config --help-keys` and `--explain KEY`, read from the fields' metadata."""

from __future__ import annotations

import dataclasses

from ddppo.envs.fields import BOUNDS, CHOICES, SHAPE, fmt
from ddppo.config.schema import Config, ConfigError, fields_of, get_key


def help_keys() -> str:
    """Every key with its one-line help (`ddppo config --help-keys`)."""
    rows = list(fields_of())
    width = max(len(k) for k, _ in rows)
    return "".join(f"{k:<{width}}  {f.metadata.get('help', '')}{'  [shape]' if f.metadata.get(SHAPE) else ''}\n"
                   for k, f in rows)


def explain(key: str, cfg: Config | None = None) -> str:
    """What a key means, its type and default (and its value in `cfg`); a section explains every key of it."""
    fields = dict(fields_of())
    keys = [key] if key in fields else [k for k in fields if k.startswith(key + ".")]
    if not keys:
        raise ConfigError(f"{key!r} is not a config key or section; `ddppo config --help-keys` lists them")
    out = []
    for k in keys:
        f = fields[k]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out.append(f"{k}: {f.type} = {default!r}" + (f"  (here: {get_key(cfg, k)!r})" if cfg is not None else ""))
        out.append(f"    {f.metadata.get('help', '')}")
        if f.metadata.get(CHOICES):
            out.append(f"    one of: {', '.join(map(str, f.metadata[CHOICES]))}")
        if f.metadata.get(BOUNDS):
            out.append(f"    range: {describe_bounds(f.metadata[BOUNDS])}")
        if f.metadata.get(SHAPE):
            out.append("    shape: changing it changes the model; a resume with another value is refused")
    return "\n".join(out) + "\n"


def describe_bounds(bounds: dict) -> str:
    """{"gt": 0, "le": 1} -> "> 0 and <= 1"."""
    ops = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    return " and ".join(f"{ops[name]} {fmt(value)}" for name, value in bounds.items())
