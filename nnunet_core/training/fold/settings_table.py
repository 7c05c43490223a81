"""The one table of every setting that reaches a fold, and whether a change invalidates it.

Each row names a setting once: its config key (``training.iterations_per_epoch``), the flag of
``nnunet-core train`` (``--iterations``; upstream's spellings kept), the ``TrainerSettings``
attribute, its type, its one default, a line of help, and ``invalidates``: whether a fold
trained with another value must start over (the schedule, the trainer and its source, plans,
configuration, splits, fold, seed, determinism, pretrained weights) or may go on with the new
value (checkpoint frequency, workers, device, threads, resources, stop margin, ...).

The schema's ``training`` properties, ``config/config.yaml``, the train parser's defaults and
``TrainerSettings`` all come from here or are checked against it
(tests/unit/training/test_fold_settings.py), so one knob has one name per place and one default:
the default a workflow user meets (the schema's). A flag of upstream's (``--npz``, ``-device``,
``-num_gpus``, ``--epochs``) keeps upstream's command-line meaning when it is left out; such a
row says so in ``flag_default``.

Rows without a config key in the schema (``in_config=False``) are recorded in a fold's
``provenance.json`` but come from the command line or from files: the plans' and the split's
content and a user trainer's source, as sha256. The loss and the optimizer have no config key:
a trainer's hooks set them, so the trainer's name and its source's sha256 stand for them
(``optimizer`` records what the command line gave, upstream's SGD unless a variant changes it).
``splits.*`` and ``planning.*`` reach a fold only through the split and plans files they make,
whose content is hashed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME
from nnunet_core.layout.results import DEFAULT_TRAINER

_SAME = object()  # flag_default: the row's default


@dataclass(frozen=True)
class Setting:
    """One setting that reaches a fold (see the module's docstring)."""

    key: str  # config key (dotted); a recorded-only name where in_config is False
    flag: str | None  # flag of `nnunet-core train`; None: the workflow sets it otherwise
    attribute: str | None  # TrainerSettings attribute; None: the fold lifecycle's or none
    types: tuple[type, ...]  # JSON types of the value; type(None) where null is allowed
    default: Any
    help: str
    invalidates: bool
    in_config: bool = True
    flag_default: Any = _SAME  # an upstream flag's value when left out, if not ``default``

    @property
    def value_type(self) -> type:
        """The type a flag's value is parsed as (the first type that is not None)."""
        return next(t for t in self.types if t is not type(None))

    @property
    def parser_default(self) -> Any:
        return self.default if self.flag_default is _SAME else self.flag_default


_NULL = type(None)

SETTINGS: tuple[Setting, ...] = (
    # -------------------------------------------------------------- invalidating: config keys
    Setting("training.trainer", "-tr", "trainer_name", (str,), DEFAULT_TRAINER,
            "trainer: a built-in name, package.module:Class, /path/file.py:Class or a "
            "class in $nnUNet_extTrainer", invalidates=True),
    Setting("training.epochs", "--epochs", "num_epochs", (int,), 1000,
            "epochs per fold", invalidates=True, flag_default=None),
    Setting("training.iterations_per_epoch", "--iterations", "num_iterations", (int,), 250,
            "training iterations per epoch", invalidates=True),
    Setting("training.val_iterations_per_epoch", "--val-iterations", "num_val_iterations",
            (int,), 50, "validation iterations per epoch (pseudo Dice)", invalidates=True),
    Setting("seed", "--seed", "seed", (int,), 0,
            "seed of patch sampling and augmentation", invalidates=True),
    Setting("deterministic", "--deterministic", None, (bool,), False,
            "torch's deterministic algorithms", invalidates=True),
    # ------------------------------------------ invalidating: command line and file contents
    Setting("configuration", "CONFIGURATION", None, (str,), None,
            "configuration in the plans (names the model folder)", invalidates=True,
            in_config=False),
    Setting("fold", "FOLD", None, (str,), None,
            "fold of the splits, or all (names the fold folder)", invalidates=True,
            in_config=False),
    Setting("plans_name", "-p", None, (str,), DEFAULT_PLANS_NAME,
            "plans name (planning.plans_name, else the planner's)", invalidates=True,
            in_config=False),
    Setting("plans_sha256", None, None, (str,), None,
            "sha256 of the plans' content", invalidates=True, in_config=False),
    Setting("splits_sha256", None, None, (str,), None,
            "sha256 of this fold's training and validation case lists", invalidates=True,
            in_config=False),
    Setting("trainer_source_sha256", None, None, (str, _NULL), None,
            "sha256 of a user trainer's source file (null: a built-in trainer)",
            invalidates=True, in_config=False),
    Setting("pretrained_weights_sha256", None, None, (str, _NULL), None,
            "sha256 of the pretrained weights a fresh fold starts from (null: none)",
            invalidates=True, in_config=False),
    Setting("optimizer", None, "optimizer", (dict,), None,
            "optimizer settings before a trainer's hooks (default: upstream's SGD, "
            "OptimizerSettings)", invalidates=True, in_config=False),
    # --------------------------------------------------------------------- not invalidating
    Setting("training.save_every", "--save-every", "save_every", (int,), 10,
            "epochs between checkpoint_latest writes", invalidates=False),
    Setting("training.num_workers", "--num-workers", "num_workers", (int, _NULL), None,
            "data workers (null: $nnUNet_n_proc_DA, else the CPUs, at most 12)",
            invalidates=False),
    Setting("training.device", "-device", None, (str,), "auto",
            "auto: cuda if torch sees a GPU, else cpu with a warning", invalidates=False,
            flag_default=None),
    Setting("training.npz", "--npz", None, (bool,), True,
            "save validation probabilities (.npz)", invalidates=False, flag_default=False),
    Setting("training.stop_margin", "--stop-margin", None, (float,), 300,
            "seconds kept free before the deadline", invalidates=False),
    Setting("training.gpu_lock_dir", "--gpu-lock-dir", None, (str, _NULL), None,
            "folder of the GPU slot locks", invalidates=False),
    Setting("training.pretrained_weights", "-pretrained_weights", None, (str, dict, _NULL), None,
            "checkpoint a fresh fold starts from (its content counts: "
            "pretrained_weights_sha256)", invalidates=False),
    Setting("training.gpus_per_job", "-num_gpus", None, (int, _NULL), None,
            "GPUs (DDP processes) per fold job", invalidates=False, flag_default=1),
    Setting("training.folds", None, None, (list,), [0, 1, 2, 3, 4],
            "folds the workflow trains", invalidates=False),
    Setting("training.nodes", None, None, (int,), 1, "nodes per fold job", invalidates=False),
    Setting("training.rdzv_endpoint", None, None, (str, _NULL), None,
            "HOST:PORT of a multi-node rendezvous", invalidates=False),
    Setting("training.folds_per_gpu", None, None, (int,), 1,
            "fold jobs sharing one GPU (local runs)", invalidates=False),
    Setting("training.retries", None, None, (int,), 3,
            "further attempts of a stopped or failed fold job", invalidates=False),
    Setting("training.threads", None, None, (int, _NULL), None,
            "threads of each fold job (OMP_NUM_THREADS)", invalidates=False),
    Setting("training.mem_mb", None, None, (int,), 64000,
            "memory of each fold job (MB)", invalidates=False),
    Setting("training.runtime", None, None, (int,), 1440,
            "runtime of each fold job (minutes)", invalidates=False),
    Setting("deadline", "--deadline", None, (str, _NULL), None,
            "when to stop cleanly (default: the SLURM job's end)", invalidates=False,
            in_config=False),
)  # fmt: skip

BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
BY_ATTRIBUTE: dict[str, Setting] = {s.attribute: s for s in SETTINGS if s.attribute}
INVALIDATING: tuple[str, ...] = tuple(s.key for s in SETTINGS if s.invalidates)


def setting(key: str) -> Setting:
    return BY_KEY[key]


def default_of(attribute: str) -> Any:
    """The default of a ``TrainerSettings`` attribute."""
    return BY_ATTRIBUTE[attribute].default


def flag_of(key: str) -> str:
    flag = BY_KEY[key].flag
    assert flag is not None, key
    return flag


def config_value(config: Mapping[str, Any], key: str) -> Any:
    """The value of a dotted key in a (schema-filled) config."""
    value: Any = config
    for part in key.split("."):
        value = value[part]
    return value


def flag_help(key: str, extra: str = "") -> str:
    """A flag's help: the row's line, ``extra``, and the default."""
    row = BY_KEY[key]
    return f"{row.help}{extra} (default {row.parser_default})"


def json_sha256(value: Any) -> str:
    """sha256 of a JSON value's compact text (key order kept): the same for the same content,
    whatever the file's formatting."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def rerun_trigger(values: Mapping[str, Any], keys: Iterable[str] = INVALIDATING) -> str:
    """One line of ``key=value`` for the invalidating settings in ``values`` (a train rule's
    param: Snakemake reruns a finished fold when it changes)."""
    return " ".join(f"{k}={json.dumps(values[k])}" for k in keys if k in values)
