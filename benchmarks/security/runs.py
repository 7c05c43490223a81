"""The two ways a probe runs its real command: the workflow (``snakemake`` on a config file in
the sandbox) and the ``nnunet-core`` CLI; both mark the run's own folders as allowed to change."""

from __future__ import annotations

from pathlib import Path

from benchmarks.security import commands
from benchmarks.security.prepared import DATASET
from benchmarks.security.probe import Command, Context


def plans_of(work: Path) -> Path:
    return work / "preprocessed" / DATASET / "nnUNetPlans.json"


def workflow(
    ctx: Context,
    config: dict,
    targets: list[str],
    *extra: str,
    names: tuple[str, ...] = (),
    expected: Path | tuple[Path, str] | None = None,
    configfile: Path | None = None,
) -> Command:
    """``snakemake TARGETS`` from ``<sandbox>/snake`` on ``config`` (written there unless
    ``configfile`` is given); the work_dir and Snakemake's folder are the run's."""
    snake = ctx.root / "snake"
    work = Path(str(config.get("work_dir", "work")))
    ctx.sandbox.allow(snake, work if work.is_absolute() else snake / work)
    configfile = configfile or commands.write_config(snake / "config.yaml", config)
    return Command(
        lambda: commands.snakemake(snake, configfile, targets, ctx.env, *extra),
        names=names,
        expected=expected,
    )


def cli(
    ctx: Context,
    args: list[str],
    *,
    names: tuple[str, ...] = (),
    expected: Path | tuple[Path, str] | None = None,
    allow: tuple[Path, ...] = (),
    env: dict[str, str] | None = None,
) -> Command:
    """``nnunet-core ARGS`` from the sandbox; ``allow``: the folders it may write."""
    ctx.sandbox.allow(*allow)
    return Command(
        lambda: commands.nnunet_core(args, ctx.root, env or ctx.env), names=names, expected=expected
    )
