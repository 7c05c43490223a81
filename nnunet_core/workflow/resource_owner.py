"""Who sets a fold job's resources: the config, unless a profile or the command line says
otherwise for the rule, and then the console says so once.

The train rule asks for the config's ``training.mem_mb``, ``training.runtime``,
``training.gpus_per_job`` and ``training.threads``. Snakemake's ``set-resources`` and
``set-threads`` (a profile's keys, or ``--set-resources train:mem_mb=...``) replace a rule's
own values, silently: a config saying ``mem_mb: 4000`` got the profile's 64000. So the profiles
shipped here set none of these for train (the config owns them, its defaults included), and
where a user's profile or command line does set one that differs from the config's value, the
override wins as Snakemake has it, and one line says which value is used. Except the GPU count:
a fold starts one process per GPU of ``training.gpus_per_job``, so a job given another count by
``set-resources`` would start the wrong number; that is refused in one line.

The rules are documented once, in docs/clusters.md ("Resources: the config or the profile");
the messages point there.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from nnunet_core.errors import ConfigurationError

WHERE = 'docs/clusters.md, "Resources: the config or the profile"'
OVERRIDE = "set-resources of a profile or the command line"


@dataclass(frozen=True)
class ConfigResource:
    """A resource of ``rule`` whose value is the config key ``key`` (``section.name``)."""

    rule: str
    resource: str
    key: str
    must_agree: bool = False  # an override would contradict the job: refused


CONFIG_RESOURCES = (
    ConfigResource("train", "mem_mb", "training.mem_mb"),
    ConfigResource("train", "runtime", "training.runtime"),
    ConfigResource("train", "gpu", "training.gpus_per_job", must_agree=True),
)
# set-threads of these rules replaces training.threads (their `threads:`)
CONFIG_THREADS = (("train", "training.threads"), ("predict", "training.threads"))

_PRINTED: set[str] = set()


def set_resources(workflow: Any) -> dict[str, Any]:
    """The rules' resources a profile or the command line set (``set-resources``): rule ->
    {resource: value}, parsed as Snakemake parses them (``mem: 32G`` is mem_mb 32000). Read from
    the public field of Snakemake's resource settings that they fill (``overwrite_resources``)."""
    from snakemake.resources import Resources

    given = workflow.resource_settings.overwrite_resources
    return {rule: Resources.from_mapping(values) for rule, values in given.items()}


def set_threads(workflow: Any) -> dict[str, Any]:
    """``set-threads`` as ``set_resources`` gives ``set-resources``: rule -> threads (the public
    ``overwrite_threads``)."""
    return dict(workflow.resource_settings.overwrite_threads)


def _plain(value: Any) -> Any:
    """A Snakemake ``Resource`` as its value (an expression as its text); anything else as is."""
    if hasattr(value, "is_evaluable"):
        return value.raw if value.is_evaluable() else value.value
    return value


def _config_value(config: Mapping[str, Any], key: str) -> Any:
    section, name = key.split(".")
    return config.get(section, {}).get(name)


def override_lines(
    config: Mapping[str, Any],
    resources: Mapping[str, Mapping[str, Any]],
    threads: Mapping[str, Any],
) -> list[str]:
    """One line per config value that an override replaces with another value (the override is
    used); raises ConfigurationError for one that must agree with the config (the GPU count).
    A config value of null (derived by the workflow) is no conflict."""
    lines = []
    for item in CONFIG_RESOURCES:
        if item.resource not in resources.get(item.rule, {}):
            continue
        given = _plain(resources[item.rule][item.resource])
        ours = _config_value(config, item.key)
        if ours is None or given == ours:
            continue
        if item.must_agree:
            msg = (
                f"config {item.key}: {ours}, but the {OVERRIDE} gives rule {item.rule} "
                f"{item.resource}={given}: a fold job would get {given} GPU(s) for {ours} "
                f"process(es); remove one of them ({WHERE})"
            )
            raise ConfigurationError(msg)
        lines.append(
            f"rule {item.rule}: {item.resource} {given} from the {OVERRIDE} is used, not "
            f"{item.key} {ours} of the config ({WHERE})"
        )
    for rule, key in CONFIG_THREADS:
        ours = _config_value(config, key)
        if rule in threads and ours is not None and _plain(threads[rule]) != ours:
            lines.append(
                f"rule {rule}: threads {_plain(threads[rule])} from the set-threads of a profile "
                f"or the command line are used, not {key} {ours} of the config ({WHERE})"
            )
    return lines


def announce(config: Mapping[str, Any], workflow: Any, stream: TextIO | None = None) -> list[str]:
    """Print each override line once per process (paper.smk reads the rules once per run) on
    stderr; a refused override raises ConfigurationError. Returns the lines printed now."""
    lines = override_lines(config, set_resources(workflow), set_threads(workflow))
    fresh = [line for line in lines if line not in _PRINTED]
    for line in fresh:
        _PRINTED.add(line)
        print(line, file=stream or sys.stderr, flush=True)
    return fresh
