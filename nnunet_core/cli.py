"""``nnunet-core <command>``: one entry point; each command lives in ``nnunet_core.commands``.

Flags mirror ``nnUNetv2_*`` where upstream has the command. Errors the user can fix print one
line (``nnunet-core <command>: error: ...``) and exit non-zero. Exit codes: 1 other errors,
2 a usage error or a broken input (dataset, config, checkpoint), 3 a user's trainer code failed
(its import, class or a hook) or the fold is being trained by another process, 4 the disk
refused a write (full, over quota or read-only: ``no space left on device writing <path>``; the
file being written is named and every atomic write leaves the previous version in place), 75
``train`` stopped before its end (stop signal or deadline; ``--c`` continues: the workflow's
retry), 76 out of memory (retried), 130 interrupted
(``nnunet_core.cluster.exit_codes``: which of them a retry can help).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from nnunet_core import __version__
from nnunet_core.cluster.exit_codes import out_of_memory_error
from nnunet_core.errors import NnunetCoreError, storage_error
from nnunet_core.layout.preprocessed import SPLITS_JSON

SINGLE_DASH_WORD = re.compile(r"-[A-Za-z][A-Za-z0-9_]+")
# command name -> (module under nnunet_core.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "synthesize": ("synthesize", "write a seeded synthetic nnU-Net raw dataset (the demo data)"),
    "verify": ("verify", "check a raw dataset's integrity; exit 2 with one line per problem"),
    "fingerprint": (
        "fingerprint",
        "extract the dataset fingerprint (spacings, shapes, intensities)",
    ),
    "plan": ("plan", "plan the experiment: configurations, patch/batch size, topology"),
    "splits": ("splits", f"write {SPLITS_JSON} (5-fold, seed 12345) once"),
    "preprocess": ("preprocess", "crop, normalize, resample and store cases as blosc2"),
    "plan-and-preprocess": (
        "plan_and_preprocess",
        "fingerprint, plan and preprocess in one go (nnUNetv2_plan_and_preprocess)",
    ),
    "extract-fingerprint": (
        "fingerprint",
        "the same as fingerprint (nnUNetv2_extract_fingerprint)",
    ),
    "plan-experiment": ("plan", "the same as plan (nnUNetv2_plan_experiment)"),
    "crossval": ("crossval", "merge a configuration's fold validations and evaluate them"),
    "ensemble-cv": ("ensemble_cv", "ensemble the cross-validation of configurations and evaluate"),
    "find-best-config": ("find_best_config", "select model(s) and postprocessing by CV Dice"),
    "ensemble": ("ensemble", "average the probabilities of prediction folders"),
    "determine-postprocessing": (
        "determine_postprocessing",
        "decide postprocessing for predictions vs references -> postprocessing.json",
    ),
    "apply-postprocessing": ("apply_postprocessing", "apply postprocessing.json to a folder"),
    "evaluate": ("evaluate", "evaluate predictions against references -> summary.json"),
    "evaluate-simple": ("evaluate_simple", "evaluate given labels, no dataset.json (-l 1 2)"),
    "train": ("train", "train one fold, then predict and evaluate its validation cases"),
    "status": ("status", "where a workflow run stands: epochs, ETAs, states, cases predicted"),
    "predict": ("predict", "predict raw images with a trained model (folds averaged, TTA)"),
    "predict-from-modelfolder": (
        "predict_from_modelfolder",
        "predict with a model folder -m (nnUNetv2_predict_from_modelfolder)",
    ),
    "export-model-to-zip": (
        "export_model_to_zip",
        "zip trained models in upstream's layout (nnUNetv2_export_model_to_zip)",
    ),
    "install-pretrained-model-from-zip": (
        "install_pretrained_model_from_zip",
        "unpack a model zip into the results root (nnUNetv2_install_pretrained_model_from_zip)",
    ),
    "download-pretrained-model-by-url": (
        "download_pretrained_model_by_url",
        "download a model zip and install it (nnUNetv2_download_pretrained_model_by_url)",
    ),
    "move-plans-between-datasets": (
        "move_plans_between_datasets",
        "copy a dataset's plans for another dataset (nnUNetv2_move_plans_between_datasets)",
    ),
    "convert-msd": (
        "convert_msd",
        "a Medical Segmentation Decathlon task as a raw dataset (nnUNetv2_convert_MSD_dataset)",
    ),
    "convert-old-dataset": (
        "convert_old_dataset",
        "an nnU-Net v1 raw task as a raw dataset (nnUNetv2_convert_old_nnUNet_dataset)",
    ),
    "plot-overlay-pngs": (
        "plot_overlay_pngs",
        "a PNG per case, labels over its slice with most foreground (nnUNetv2_plot_overlay_pngs)",
    ),
    "report": ("report", "write results/D/report: figures, tables and report.md"),
    "paper-table": (
        "paper_table",
        "results table across datasets and seeds (CSV, LaTeX) and methods paragraphs",
    ),
    "methods-table": (
        "methods_table",
        "methods against the baseline across datasets and seeds (CSV, LaTeX, figures)",
    ),
    "reproduce": (
        "reproduce",
        "pack a finished run for a reader, unpack it, check a rerun's tables byte for byte",
    ),
}


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (its usage block buries the message in a log)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the selected command's module is imported (each costs startup time)."""
    return _build(selected)[0]


def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one command, as ``nnunet-core NAME --help`` prints it (the docs' reference)."""
    command = _build(name)[1]
    if command is None:
        raise KeyError(name)
    return command


def _build(
    selected: str | None,
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    parser = _Parser(
        prog="nnunet-core",
        description="nnU-Net v2 method: dataset checks, planning, preprocessing and more.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    selected_parser = None
    for name, (module_name, help_text) in COMMANDS.items():
        if name != selected:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        module = importlib.import_module(f"nnunet_core.commands.{module_name}")
        selected_parser = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.configure_parser(selected_parser)
        selected_parser.set_defaults(_run=module.run)
    return parser, selected_parser


def unknown_single_dash_option(
    command_parser: argparse.ArgumentParser, argv: Sequence[str]
) -> str | None:
    """The first ``-word`` flag the command does not define, else None.

    argparse reads an unknown ``-plans_name`` as the short flag ``-p`` with the value
    ``lans_name`` (or an abbreviation of a longer flag); upstream's users type single-dash long
    flags all the time, so an unknown one is refused instead of being misread.
    """
    # every option string of the command; argparse keeps them only in this attribute
    known = set(command_parser._option_string_actions)
    for arg in argv:
        if arg == "--":
            break
        if SINGLE_DASH_WORD.fullmatch(arg) and arg not in known:
            return arg
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    selected = next((arg for arg in argv if not arg.startswith("-")), None)
    parser, command_parser = _build(selected if selected in COMMANDS else None)
    if command_parser is not None:
        unknown = unknown_single_dash_option(command_parser, argv[argv.index(selected) + 1 :])
        if unknown is not None:
            close = difflib.get_close_matches(unknown, command_parser._option_string_actions, 1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            print(f"nnunet-core {selected}: error: unknown option {unknown}{hint}", file=sys.stderr)
            return 2
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except NnunetCoreError as exc:
        return _report(args.command, exc)
    except Exception as exc:  # a full or read-only disk is one line too; anything else: traceback
        error = storage_error(exc) or out_of_memory_error(exc)
        if error is None:
            raise
        return _report(args.command, error)
    except KeyboardInterrupt:
        print(f"nnunet-core {args.command}: interrupted", file=sys.stderr)
        return 130


def _report(command: str, exc: NnunetCoreError) -> int:
    try:
        print(f"nnunet-core {command}: error: {exc}", file=sys.stderr, flush=True)
    except OSError:  # stderr is a file on the disk that just filled up: the exit code says it
        pass
    return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
