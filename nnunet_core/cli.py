"""``nnunet-core <command>``: one entry point; each command lives in ``nnunet_core.commands``.

Flags mirror ``nnUNetv2_*`` where upstream has the command. Errors the user can fix print one
line (``nnunet-core <command>: error: ...``) and exit non-zero (2 for a broken dataset).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from nnunet_core import __version__
from nnunet_core.errors import NnunetCoreError

# command name -> (module under nnunet_core.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "synthesize": ("synthesize", "write a seeded synthetic nnU-Net raw dataset (the demo data)"),
    "verify": ("verify", "check a raw dataset's integrity; exit 2 with one line per problem"),
    "fingerprint": (
        "fingerprint",
        "extract the dataset fingerprint (spacings, shapes, intensities)",
    ),
    "plan": ("plan", "plan the experiment: configurations, patch/batch size, topology"),
    "splits": ("splits", "write splits_final.json (5-fold, seed 12345) once"),
    "preprocess": ("preprocess", "crop, normalize, resample and store cases as blosc2"),
    "crossval": ("crossval", "merge a configuration's fold validations and evaluate them"),
    "ensemble-cv": ("ensemble_cv", "ensemble the cross-validation of configurations and evaluate"),
    "find-best-config": ("find_best_config", "select model(s) and postprocessing by CV Dice"),
    "ensemble": ("ensemble", "average the probabilities of prediction folders"),
    "apply-postprocessing": ("apply_postprocessing", "apply postprocessing.json to a folder"),
    "evaluate": ("evaluate", "evaluate predictions against references -> summary.json"),
    "train": ("train", "train one fold, then predict and evaluate its validation cases"),
    "predict": ("predict", "predict raw images with a trained model (folds averaged, TTA)"),
    "report": ("report", "write results/D/report: figures, tables and report.md"),
}


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the selected command's module is imported (each costs startup time)."""
    parser = argparse.ArgumentParser(
        prog="nnunet-core",
        description="nnU-Net v2 method: dataset checks, planning, preprocessing and more.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        if name != selected:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        module = importlib.import_module(f"nnunet_core.commands.{module_name}")
        command_parser = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.configure_parser(command_parser)
        command_parser.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    selected = next((arg for arg in argv if not arg.startswith("-")), None)
    parser = build_parser(selected if selected in COMMANDS else None)
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except NnunetCoreError as exc:
        print(f"nnunet-core {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"nnunet-core {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
