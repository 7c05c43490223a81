"""Config paths the workflow cannot pass on safely, refused in one line before any job.

Every path reaches the rules' shells quoted (``:q``, nnunet_core.workflow.flags), so spaces,
quotes, ``$(...)``, ``;`` and unicode are plain characters. Two things quoting cannot fix:

* a relative path starting with ``-`` (``work_dir: -wd``): every path under it starts with ``-``
  too, and a command reads such an argument as an option (an absolute path never starts so);
* ``{`` or ``}`` in a path that names rule inputs or outputs, or in a value the rules' params
  carry as text (the trainer's file, the GPU lock folder): Snakemake reads them as wildcards.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from nnunet_core.errors import ConfigurationError

WILDCARD_BRACES = "{}"


def _declared_paths(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, value) of each config path under which the rules declare files."""
    yield "work_dir", config.get("work_dir")
    yield "dataset.raw_root", (config.get("dataset") or {}).get("raw_root")
    pretrained = (config.get("training") or {}).get("pretrained_weights")
    if isinstance(pretrained, Mapping):
        yield "training.pretrained_weights.model", pretrained.get("model")
    else:
        yield "training.pretrained_weights", pretrained


def _param_values(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, value) of each config value that a rule's params carry as text, which Snakemake
    formats with the job's wildcards."""
    training = config.get("training") or {}
    yield "training.trainer", training.get("trainer")
    yield "training.gpu_lock_dir", training.get("gpu_lock_dir")


def _refuse_braces(key: str, value: str) -> None:
    braces = sorted({c for c in value if c in WILDCARD_BRACES})
    if braces:
        msg = (
            f"config {key}: {value!r} holds {' and '.join(braces)}, which Snakemake reads "
            "as a wildcard: rename the folder"
        )
        raise ConfigurationError(msg)


def check_shell_paths(config: Mapping[str, Any]) -> None:
    """Refuse (one line, naming the key and the value) a path no quoting makes safe: see the
    module docstring. Other odd characters pass; the rules quote them."""
    for key, value in _declared_paths(config):
        if not isinstance(value, str) or not value:
            continue
        if value.startswith("-"):
            msg = (
                f"config {key}: {value!r} starts with '-', which a command reads as an option: "
                "give an absolute path"
            )
            raise ConfigurationError(msg)
        _refuse_braces(key, value)
    for key, value in _param_values(config):
        if isinstance(value, str):
            _refuse_braces(key, value)
