"""A rank's share of a demonstration dataset for behaviour cloning: which episodes it trains and validates on, and
the padded (T, B) batches of each update.

The episodes are numbered in the dataset's order (shards by rank, then index). Every k-th episode (k = 1 /
imitation.val_fraction, rounded) is held out; rank r takes the r-th contiguous block of the training episodes and
of the held-out ones, so it reads only the shards that hold them. Update u's batch is positions [(u-1) B, u B) of
an endless stream of the rank's training episodes, reshuffled every pass from (run.seed, rank, pass): it depends on
the update alone, so a resumed run continues with the batches it would have had.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ddppo.imitation.dataset import Dataset, DatasetError, Episodes


@dataclass
class Batch:
    """Padded episodes, time first: obs[key] (T, B, ...), actions (T, B[, A]), start / valid / weight (T, B)."""

    obs: dict[str, torch.Tensor]
    actions: torch.Tensor
    start: torch.Tensor
    valid: torch.Tensor
    weight: torch.Tensor


def split_ids(num_episodes: int, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(training ids, held-out ids) of the dataset's episodes: every k-th held out."""
    ids = np.arange(num_episodes)
    if val_fraction <= 0:
        return ids, ids[:0]
    k = max(2, int(round(1.0 / val_fraction)))
    held = ids % k == k - 1
    return ids[~held], ids[held]


def block(ids: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    return np.array_split(ids, world_size)[rank]


def select(episodes: Episodes, local: np.ndarray) -> Episodes:
    """The episodes at positions `local` of `episodes`, in that order."""
    starts, lengths = episodes.starts, episodes.lengths
    steps = np.concatenate([np.arange(starts[i], starts[i] + lengths[i]) for i in local]) if len(local) else \
        np.zeros(0, np.int64)
    return Episodes({k: v[steps] for k, v in episodes.obs.items()}, episodes.actions[steps], episodes.rewards[steps],
                    lengths[local], episodes.success[local], episodes.terminated[local])


def load_ids(data: Dataset, ids: np.ndarray) -> Episodes:
    """The episodes `ids` (dataset order) read from the shards that hold them (none: an empty set of the dataset's
    layout)."""
    if not len(ids):
        return select(data.load(data.shards[:1]), np.zeros(0, np.int64))
    bounds = np.cumsum([0] + [s["episodes"] for s in data.shards])
    needed = [j for j, s in enumerate(data.shards) if ((ids >= bounds[j]) & (ids < bounds[j + 1])).any()]
    loaded = data.load([data.shards[j] for j in needed])
    offset = {j: sum(data.shards[i]["episodes"] for i in needed[:n]) for n, j in enumerate(needed)}
    local = np.array([offset[j] + i - bounds[j] for i in ids
                      for j in [int(np.searchsorted(bounds, i, side="right") - 1)]], np.int64)
    return select(loaded, local)


def inflections(actions: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """(steps,) True where the expert's action differs from its previous one in the same episode."""
    changed = np.zeros(actions.shape[0], bool)
    changed[1:] = (actions[1:] != actions[:-1]).reshape(actions.shape[0] - 1, -1).any(-1)
    changed[starts] = False
    return changed


class RankDemonstrations:
    """This rank's training and held-out episodes, and the batches of its updates."""

    def __init__(self, data: Dataset, val_fraction: float, rank: int, world_size: int, seed: int):
        train_ids, val_ids = split_ids(data.num_episodes, val_fraction)
        if len(train_ids) < world_size:
            raise DatasetError(f"{data.root} has {len(train_ids)} training episodes for {world_size} ranks: record "
                               f"more, or lower imitation.val_fraction")
        self.train = load_ids(data, block(train_ids, rank, world_size))
        self.val = load_ids(data, block(val_ids, rank, world_size))
        self.rank, self.seed = rank, seed
        self.inflection_coef = 1.0  # set by `weigh_inflections`

    def train_inflections(self) -> tuple[int, int]:
        """(steps, inflections) of this rank's training episodes (the coefficient is the ranks' total ratio)."""
        return self.train.num_steps, int(inflections(self.train.actions, self.train.starts).sum())

    def episode_order(self, update: int, batch: int) -> np.ndarray:
        """The rank's training episodes of update `update` (1-based)."""
        n = self.train.num_episodes
        first = (update - 1) * batch
        out = []
        for pos in range(first, first + batch):
            epoch, i = divmod(pos, n)
            out.append(np.random.default_rng([self.seed, self.rank, epoch]).permutation(n)[i])
        return np.array(out, np.int64)

    def batch(self, update: int, size: int, device: torch.device) -> Batch:
        return pad(select(self.train, self.episode_order(update, size)), self.inflection_coef, device)

    def val_batches(self, size: int, device: torch.device) -> list[Batch]:
        """The held-out episodes in batches of `size` (none where this rank holds none)."""
        n = self.val.num_episodes
        return [pad(select(self.val, np.arange(i, min(n, i + size))), 1.0, device) for i in range(0, n, size)]


def pad(eps: Episodes, inflection_coef: float, device: torch.device) -> Batch:
    """Episodes side by side, padded to the longest, time first; `weight` is `inflection_coef` where the expert's
    action changes, else 1 (0 on padding)."""
    T, B = int(eps.lengths.max()), eps.num_episodes
    starts = eps.starts
    t = np.concatenate([np.arange(n) for n in eps.lengths])
    b = np.repeat(np.arange(B), eps.lengths)
    obs = {}
    for k, v in eps.obs.items():
        padded = np.zeros((T, B, *v.shape[1:]), v.dtype)
        padded[t, b] = v
        obs[k] = torch.from_numpy(padded).to(device)
    actions = np.zeros((T, B, *eps.actions.shape[1:]), eps.actions.dtype)
    actions[t, b] = eps.actions
    valid = np.zeros((T, B), np.float32)
    valid[t, b] = 1.0
    weight = valid.copy()
    if inflection_coef != 1.0:
        weight[t, b] = np.where(inflections(eps.actions, starts), inflection_coef, 1.0)
    start = np.zeros((T, B), np.float32)
    start[0] = 1.0
    return Batch(obs, torch.from_numpy(actions).to(device), torch.from_numpy(start).to(device),
                 torch.from_numpy(valid).to(device), torch.from_numpy(weight).to(device))


def inflection_coefficient(steps: float, changes: float) -> float:
    """habitat-web's coefficient: steps / inflections over the training data (1 where there are none)."""
    return float(steps / changes) if changes > 0 else 1.0
