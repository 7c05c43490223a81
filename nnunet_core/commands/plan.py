"""Plan the experiment: configurations, target spacing, patch and batch size, network topology.

Also ``plan-experiment`` (upstream's ``nnUNetv2_plan_experiment``); ``-d`` takes several datasets.
Reads ``dataset_fingerprint.json`` (run ``fingerprint`` first) and the raw ``dataset.json``;
writes ``<plans-name>.json`` and a copy of ``dataset.json`` to the preprocessed dataset folder.
Runs ``verify`` first unless ``verify.json`` is current (``commands.verify.ensure_verified``).
The plans are regenerated from scratch on every run; extra configurations come from
``--overrides`` (a JSON file or inline JSON: ``{"name": {"inherits_from": "3d_fullres", ...}}``).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from nnunet_core.commands.common import (
    add_datasets_flag,
    add_root_flags,
    datasets_from_args,
    default_num_processes,
    require_default_class,
)
from nnunet_core.commands.verify import ensure_verified
from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import atomic_path, read_json, write_json
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.plans import Plans
from nnunet_core.layout.preprocessed import FINGERPRINT_JSON, plans_file
from nnunet_core.layout.raw import DATASET_JSON, images_tr_dir
from nnunet_core.layout.roots import Roots, preprocessed_dataset_dir, raw_dataset_dir
from nnunet_core.planning.overrides import apply_overrides
from nnunet_core.planning.planner import PREPROCESSOR_NAME, plan_experiment
from nnunet_core.planning.presets import PRESETS
from nnunet_core.planning.user_planner import resolve_planner


def add_planning_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared with ``plan-and-preprocess``; upstream's spellings work as well as ours."""
    parser.add_argument(
        "--gpu-memory-target",
        "-gpu_memory_target",
        type=float,
        default=None,
        metavar="GB",
        help=(
            "GPU memory to plan for in GB (default: the planner's own, 8; ResEncL 24, ResEncXL 40)"
        ),
    )
    parser.add_argument(
        "-pl",
        "--planner",
        default="default",
        help=f"planner: {', '.join(PRESETS)}, upstream's class name "
        f"({', '.join(p.__name__ for p in PRESETS.values())}), or your own: "
        "/path/file.py:Class, package.module:Class, or a class in nnUNet_extPlanner's folders",
    )
    parser.add_argument("--overrides", help="extra configurations: a JSON file or inline JSON")
    parser.add_argument(
        "--plans-name",
        "-overwrite_plans_name",
        help="plans file name (default: the planner's, e.g. nnUNetPlans; MyPlanner's: MyPlans)",
    )
    parser.add_argument(
        "--overwrite-target-spacing",
        "-overwrite_target_spacing",
        type=float,
        nargs="+",
        metavar="S",
        help="full-resolution target spacing (z y x), replacing the automatic choice",
    )
    parser.add_argument(
        "-preprocessor_name",
        "--preprocessor-name",
        default=PREPROCESSOR_NAME,
        metavar="CLASS",
        help=f"preprocessor class written to the plans; only {PREPROCESSOR_NAME} exists here",
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_datasets_flag(parser)
    add_root_flags(parser)
    add_planning_flags(parser)
    parser.add_argument("--verbose", action="store_true", help="accepted; changes nothing")


def load_overrides(value: str | None) -> dict[str, Any]:
    """``--overrides``: inline JSON if it starts with '{', else a JSON file."""
    if not value:
        return {}
    try:
        if value.lstrip().startswith("{"):
            return json.loads(value)
        path = Path(value)
        if not path.is_file():
            msg = f"overrides file {value!r} not found"
            raise ConfigurationError(msg)
        return read_json(path)
    except json.JSONDecodeError as exc:
        msg = f"overrides {value[:60]!r} are not valid JSON ({exc})"
        raise ConfigurationError(msg) from None


def summary(plans: Plans) -> str:
    """One line per configuration: what a user checks first."""
    lines = [
        f"{plans.name} ({plans.raw['experiment_planner_used']}), transpose "
        f"{list(plans.transpose_forward)}"
    ]
    for name in plans.configuration_names:
        config = plans.configuration(name)
        previous = config.previous_stage
        extra = f", previous stage {previous}" if previous is not None else ""
        spacing = ", ".join(f"{s:.4g}" for s in config.spacing)
        lines.append(
            f"  {name}: spacing ({spacing}), patch {list(config.patch_size)}, "
            f"batch {config.batch_size}, {len(config.strides)} stages, median shape "
            f"{[round(m, 1) for m in config.median_image_size_in_voxels]}{extra}"
        )
    return "\n".join(lines)


def plan_one(roots: Roots, name: str, args: argparse.Namespace) -> str:
    """Plan one dataset from the ``add_planning_flags`` values; returns the plans name."""
    planner = resolve_planner(args.planner)
    # the fingerprint came from the raw data: refuse it if that data is not verified as it is now
    # (planning from a fingerprint alone, with no raw images at hand, stays possible as upstream)
    if images_tr_dir(raw_dataset_dir(roots, name)).is_dir():
        ensure_verified(roots, name, default_num_processes(), getattr(args, "command", "plan"))
    raw_json = raw_dataset_dir(roots, name) / DATASET_JSON
    dataset_json = load_dataset_json(raw_json)
    out_dir = preprocessed_dataset_dir(roots, name)
    fingerprint_path = out_dir / FINGERPRINT_JSON
    if not fingerprint_path.is_file():
        msg = f"{fingerprint_path} not found: run `nnunet-core fingerprint -d {name}` first"
        raise ConfigurationError(msg)
    plans_name = args.plans_name or planner.default_plans_name()
    plans = plan_experiment(
        read_json(fingerprint_path),
        dataset_json.raw,
        name,
        gpu_memory_target_gb=args.gpu_memory_target,
        planner=args.planner,
        overwrite_target_spacing=args.overwrite_target_spacing,
        plans_name=plans_name,
    )
    plans = apply_overrides(plans, load_overrides(args.overrides))
    target = plans_file(out_dir, plans_name)
    write_json(target, plans)
    with atomic_path(out_dir / DATASET_JSON, suffix=".json") as tmp:
        shutil.copyfile(raw_json, tmp)
    print(summary(Plans(plans, target)))
    print(f"plans written to {target}")
    return plans_name


def check_planning_args(args: argparse.Namespace) -> None:
    """Fail on a bad planner or preprocessor before any dataset is touched."""
    resolve_planner(args.planner)
    require_default_class("-preprocessor_name", args.preprocessor_name, PREPROCESSOR_NAME)


def run(args: argparse.Namespace) -> int:
    check_planning_args(args)
    roots, names = datasets_from_args(args)
    for name in names:
        plan_one(roots, name, args)
    return 0
