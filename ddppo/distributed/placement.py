"""Placement: which ranks take which role (RLinf's component placement, on the ranks of one torch.distributed job).

The config's `placement` section gives each role its ranks as text: `all`, `""` (no rank: the role is not placed
on ranks of its own), or ranks and inclusive ranges joined by commas (`0-3,6`). Every rank takes exactly one
role; a role's ranks become a named group of the context (DistContext.group) and its collectives run on it.
The colocated default is one role, `train`, on every rank: each rank collects, scores and learns, and
all-reduces with every other one (DD-PPO). A role added later is one more key of the section; this module reads
whatever roles the section holds, in its order.

Text is checked when the config is loaded (`spec_problems`); ranges against the world size at start-up
(`resolve`), once the launcher has said how many ranks there are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ddppo.errors import ConfigError

TRAIN = "train"  # the colocated role: collect, score, learn
ALL = "all"


def parse_ranks(spec: str) -> tuple[int, ...] | None:
    """The ranks `spec` names, ascending (None for `all`); ValueError saying what is wrong with the text."""
    text = str(spec).strip()
    if text == ALL:
        return None
    ranks: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, dash, last = part.partition("-")
        if not first.strip().isdigit() or (dash and not last.strip().isdigit()):
            raise ValueError(f"{part!r} is not a rank (N) or a range of ranks (A-B)")
        lo, hi = int(first), int(last) if dash else int(first)
        if hi < lo:
            raise ValueError(f"the range {part!r} runs backwards (write {hi}-{lo})")
        ranks.extend(range(lo, hi + 1))
    if len(set(ranks)) != len(ranks):
        raise ValueError("it names a rank twice")
    return tuple(sorted(ranks))


def spec_problems(specs: Mapping[str, str], prefix: str = "placement.") -> list[str]:
    """What is wrong with each role's text, naming key and fix (the ranges are checked against the world size at
    start-up, by `resolve`)."""
    out = []
    for role, spec in specs.items():
        try:
            parse_ranks(spec)
        except ValueError as err:
            out.append(f"{prefix}{role}={spec!r}: {err}; write '{ALL}', '' (no rank), or ranks and ranges such as "
                       f"'0-3,6'")
    return out


@dataclass(frozen=True)
class Placement:
    """Each role's ranks (ascending; roles without ranks left out) in a job of `world_size` ranks."""

    world_size: int
    roles: Mapping[str, tuple[int, ...]]

    @classmethod
    def colocated(cls, world_size: int) -> Placement:
        """The default: `train` on every rank."""
        return cls(world_size, {TRAIN: tuple(range(world_size))})

    def ranks(self, role: str) -> tuple[int, ...]:
        if role not in self.roles:
            raise KeyError(f"no rank takes the role {role!r} (placed: {', '.join(self.roles)})")
        return self.roles[role]

    def role_of(self, rank: int) -> str:
        return next(role for role, ranks in self.roles.items() if rank in ranks)

    def spans_world(self, role: str) -> bool:
        return len(self.ranks(role)) == self.world_size

    def group(self, role: str, rank: int) -> Group:
        """The role's group as `rank` sees it."""
        ranks = self.ranks(role)
        return Group(role, ranks, ranks.index(rank) if rank in ranks else -1)


@dataclass(frozen=True)
class Group:
    """A role's ranks as one rank sees them: `rank` is its place among them (-1: it is not one of them)."""

    name: str
    ranks: tuple[int, ...]
    rank: int

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def is_main(self) -> bool:
        """The group's first rank (the one that tidies what the group shares)."""
        return self.rank == 0


def resolve(specs: Mapping[str, str], world_size: int, prefix: str = "placement.") -> Placement:
    """The placement `specs` (role -> text) gives a job of `world_size` ranks; one ConfigError naming every
    problem (bad text, a rank past the world, a rank with two roles or none) and its fix."""
    problems = spec_problems(specs, prefix)
    if problems:
        raise ConfigError("; ".join(problems))
    roles: dict[str, tuple[int, ...]] = {}
    owner: dict[int, str] = {}
    for role, spec in specs.items():
        ranks = parse_ranks(spec)
        ranks = tuple(range(world_size)) if ranks is None else ranks
        outside = [r for r in ranks if r >= world_size]
        if outside:
            problems.append(f"{prefix}{role}={spec!r} names rank(s) {_ranges(outside)}, past the job's "
                            f"{world_size} rank(s) (0-{world_size - 1}): start more ranks or name fewer")
        for other in dict.fromkeys(owner[r] for r in ranks if r in owner):
            both = [r for r in ranks if owner.get(r) == other]
            problems.append(f"{prefix}{role}={spec!r} and {prefix}{other}={specs[other]!r} both take rank(s) "
                            f"{_ranges(both)}: a rank has one role; give each role ranks of its own")
        for r in ranks:
            owner.setdefault(r, role)
        if ranks:
            roles[role] = ranks
    idle = [r for r in range(world_size) if r not in owner]
    if idle and not problems:
        problems.append(f"rank(s) {_ranges(idle)} of {world_size} take no role in "
                        f"{', '.join(f'{prefix}{k}={v!r}' for k, v in specs.items())}: give every rank a role "
                        f"(the colocated default: {prefix}{TRAIN}={ALL})")
    if problems:
        raise ConfigError("; ".join(problems))
    return Placement(world_size, roles)


def placement_lines(specs: Mapping[str, str]) -> str:
    """`ddppo config`'s placement comment: each role's ranks (the world size is the launcher's)."""
    rows = [f"#   {role}: {_say(spec)}\n" for role, spec in specs.items()]
    colocated = list(specs.values()) == [ALL]
    return (f"# placement ({'colocated: every rank collects and learns' if colocated else 'roles on ranks'}; "
            f"the launcher sets the world size):\n" + "".join(rows))


def _say(spec: str) -> str:
    ranks = parse_ranks(spec)
    if ranks is None:
        return "every rank"
    return f"ranks {_ranges(ranks)}" if ranks else "no rank"


def _ranges(ranks) -> str:
    """[0, 1, 2, 5] -> "0-2,5"."""
    out: list[str] = []
    ranks = sorted(ranks)
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(out)
