"""Cross-validation splits: 5-fold, shuffled with seed 12345 over sorted case ids (as upstream).

Upstream draws them with scikit-learn's ``KFold(shuffle=True, random_state=seed)``; this is the same
permutation (``RandomState(seed).shuffle``) and the same fold sizes (the first ``n % k`` folds get
one case more), so our folds hold exactly upstream's cases.
"""

from __future__ import annotations

import numpy as np

from nnunet_core.errors import ConfigurationError

DEFAULT_NUM_FOLDS = 5
DEFAULT_SEED = 12345


def kfold_splits(
    identifiers: list[str], num_folds: int = DEFAULT_NUM_FOLDS, seed: int = DEFAULT_SEED
) -> list[dict[str, list[str]]]:
    """``[{'train': [...], 'val': [...]}, ...]`` over the sorted identifiers."""
    keys = sorted(identifiers)
    if num_folds < 2:
        msg = f"need at least 2 folds, got {num_folds}"
        raise ConfigurationError(msg)
    if len(keys) < num_folds:
        msg = f"{len(keys)} training cases cannot be split into {num_folds} folds"
        raise ConfigurationError(msg)
    if not 0 <= seed <= 2**32 - 1:  # numpy's RandomState (upstream's KFold) takes 32 bits
        msg = f"the split seed must be between 0 and {2**32 - 1}, got {seed}"
        raise ConfigurationError(msg)
    order = np.arange(len(keys))
    np.random.RandomState(seed).shuffle(order)
    sizes = np.full(num_folds, len(keys) // num_folds)
    sizes[: len(keys) % num_folds] += 1
    splits = []
    start = 0
    for size in sizes:
        val_idx = order[start : start + size]
        start += size
        is_val = np.zeros(len(keys), dtype=bool)
        is_val[val_idx] = True
        splits.append(
            {
                "train": [keys[i] for i in np.flatnonzero(~is_val)],
                "val": [keys[i] for i in np.flatnonzero(is_val)],
            }
        )
    return splits


def check_splits(splits: object, identifiers: list[str], source: str) -> None:
    """A user-supplied splits file must name only known cases and validate each case once."""
    if not isinstance(splits, list) or not all(
        isinstance(s, dict) and {"train", "val"} <= s.keys() for s in splits
    ):
        msg = f"{source}: must be a list of {{'train': [...], 'val': [...]}} folds"
        raise ConfigurationError(msg)
    known = set(identifiers)
    for fold, split in enumerate(splits):
        unknown = sorted((set(split["train"]) | set(split["val"])) - known)
        if unknown:
            msg = f"{source}: fold {fold} names unknown case(s) {', '.join(unknown[:5])}"
            raise ConfigurationError(msg)
        overlap = sorted(set(split["train"]) & set(split["val"]))
        if overlap:
            msg = (
                f"{source}: fold {fold} has case(s) in both train and val: {', '.join(overlap[:5])}"
            )
            raise ConfigurationError(msg)
