"""Config values that reach shell commands: the workflow's raw_root, work_dir, trainer, GPU lock
folder and names, given in a config file or on Snakemake's command line.

Each hostile path tries ``touch <marker>`` through ``$(...)``, backticks, ``;``, ``|``, ``||``,
quotes or a newline, or has a space before which a user's file of that name lies. A path that
can exist (a newline included: issue 51 asks such a run to complete) is a correct run (the
workflow's stage writes its file and nothing runs); a name that nnU-Net's rules forbid and an
absurd number are one-line refusals."""

from __future__ import annotations

import shutil
from pathlib import Path

from benchmarks.security.prepared import DATASET, MODEL, base_config, raw_root_config
from benchmarks.security.probe import REFUSAL, RUN, Command, Context, Probe
from benchmarks.security.runs import plans_of, workflow

PLANNED = ["planned"]
# path parts: {M} is the marker's absolute path (a regular file named PWNED in the sandbox)
HOSTILE_PATHS = {
    "dollar": ("x$(touch {M})", RUN),
    "or": ("z || touch {M}; :", RUN),  # the sandbox holds a user's file `z`
    "backticks": ("x`touch {M}`", RUN),
    "semicolon": ("x;touch {M};", RUN),
    "pipe": ("x|touch {M}", RUN),
    "quotes": ("q'$(touch {M})'\"x\"", RUN),  # closes a single-quoted word, then a double one
    "unicode": ("données ü 数据", RUN),
    "newline": ("x\ntouch {M}\n", RUN),  # a legal path: nnU-Net's rules do not forbid it
}


def _hostile(ctx: Context, template: str) -> str:
    return str(ctx.root / template.format(M=ctx.marker))


def raw_root_probe(name: str, template: str, expect: str) -> Probe:
    def setup(ctx: Context) -> Command:
        raw_root = _hostile(ctx, template)
        shutil.copytree(ctx.prepared.raw, Path(raw_root) / DATASET)
        work = ctx.root / "work"
        config = raw_root_config(str(work), raw_root)
        return workflow(ctx, config, PLANNED, names=("raw_root", raw_root), expected=plans_of(work))

    return Probe(f"raw_root_{name}", "config", expect, f"dataset.raw_root {template!r}", setup)


def work_dir_probe(name: str, template: str, expect: str) -> Probe:
    def setup(ctx: Context) -> Command:
        work = _hostile(ctx, template)
        config = raw_root_config(work, str(ctx.sandbox.rawcopy))
        return workflow(
            ctx, config, PLANNED, names=("work_dir", work), expected=plans_of(Path(work))
        )

    return Probe(f"work_dir_{name}", "config", expect, f"work_dir {template!r}", setup)


def _raw_root_space(ctx: Context) -> Command:
    raw_root = ctx.root / "r data"  # the sandbox holds a user's file `r`
    shutil.copytree(ctx.prepared.raw, raw_root / DATASET)
    config = raw_root_config(str(ctx.root / "work"), str(raw_root))
    return workflow(ctx, config, PLANNED, expected=plans_of(ctx.root / "work"))


def _work_dir_space(ctx: Context) -> Command:
    work = ctx.root / "fresh run"  # `> {log}` unquoted overwrote the user's file `fresh`
    config = raw_root_config(str(work), str(ctx.sandbox.rawcopy))
    return workflow(ctx, config, PLANNED, expected=plans_of(work))


def _work_dir_dash(ctx: Context) -> Command:
    """Relative to --directory; quoted or not, ``--raw '-rf x/raw'`` is an option to argparse."""
    config = raw_root_config("-rf x", str(ctx.sandbox.rawcopy))
    return workflow(ctx, config, PLANNED, names=("work_dir", "-rf x"))


def _work_dir_space_predict(ctx: Context) -> Command:
    """A trained run in `wd mv`: the predict job clears its `.partial` folder first (once
    `rm -rf {staging}`, which deleted the user's folder `wd`)."""
    work = ctx.root / "wd mv"
    shutil.copytree(ctx.prepared.work, work, symlinks=True)
    config = base_config(str(work))
    final = work / "predictions" / DATASET / "final"  # postprocess, after select and predict
    expected = (work, "predictions/**/*.nii.gz")
    return workflow(ctx, config, [str(final)], expected=expected)


TRAINER = '''"""A user's trainer in a folder whose name holds a command substitution."""
from nnunet_core import Trainer


class SecTrainer(Trainer):
    pass
'''


def _trainer_path(ctx: Context) -> Command:
    """The issue's value: ``$IFS`` stands for the space the old schema forbade."""
    folder = Path(str(ctx.root / "w$(touch$IFS{M})").format(M=ctx.marker))
    folder.mkdir(parents=True)
    (folder / "t.py").write_text(TRAINER)
    work = ctx.prepared.copy_preprocessed(ctx.root / "work")
    config = base_config(str(work))
    config["training"]["trainer"] = f"{folder}/t.py:SecTrainer"
    return workflow(
        ctx, config, ["trained"], names=("trainer",),
        expected=(work, "results/*/SecTrainer*/fold_0/checkpoint_final.pth"),
    )  # fmt: skip


def _trainer_path_braces(ctx: Context) -> Command:
    """``${IFS}``: braces in a value the rules' params carry, which Snakemake would read as a
    wildcard; refused in one line before any job."""
    folder = Path(str(ctx.root / "w$(touch${{IFS}}{M})").format(M=ctx.marker))
    folder.mkdir(parents=True)
    (folder / "t.py").write_text(TRAINER)
    work = ctx.prepared.copy_preprocessed(ctx.root / "work")
    config = base_config(str(work))
    config["training"]["trainer"] = f"{folder}/t.py:SecTrainer"
    return workflow(ctx, config, ["trained"], names=("trainer",))


def _gpu_lock_dir(ctx: Context) -> Command:
    work = ctx.prepared.copy_preprocessed(ctx.root / "work")
    locks = ctx.root / f"locks$(touch {ctx.marker})"
    config = base_config(str(work))
    config["training"]["gpu_lock_dir"] = str(locks)
    ctx.sandbox.allow(ctx.root / "locks$(touch ")  # the lock folder, should it be made
    return workflow(
        ctx, config, ["trained"], names=("gpu_lock_dir",),
        expected=(work, "results/*/nnUNetTrainer__*/fold_0/checkpoint_final.pth"),
    )  # fmt: skip


def refused_key(name: str, what: str, key: str, change) -> Probe:
    """A config value nnU-Net's rules (the schema) forbid: refused before any job."""

    def setup(ctx: Context) -> Command:
        config = raw_root_config(str(ctx.root / "work"), str(ctx.sandbox.rawcopy))
        change(config, str(ctx.marker))
        return workflow(ctx, config, PLANNED, names=(key,))

    return Probe(name, "config", REFUSAL, what, setup)


def _set(section: str | None, key: str, value):
    def change(config: dict, marker: str) -> None:
        target = config if section is None else config.setdefault(section, {})
        target[key] = value.format(M=marker) if isinstance(value, str) else value

    return change


def _nsd_crossval(ctx: Context) -> Command:
    """A tolerance per label, keyed by a name the dataset does not have, reaching crossval's
    ``--nsd-tolerance`` (a copy of the trained run: only crossval runs)."""
    work = ctx.root / "work"
    shutil.copytree(ctx.prepared.work, work, symlinks=True)
    config = base_config(str(work))
    evaluation = config.setdefault("evaluation", {})
    evaluation.update(surface_metrics=True, nsd_tolerance_mm={f"a$(touch {ctx.marker})": 2.0})
    summary = work / "results" / DATASET / MODEL / "crossval_results_folds_0" / "summary.json"
    return workflow(ctx, config, [str(summary)], names=("nsd", "a$(touch"))


def _override(config: dict, marker: str) -> None:
    config["planning"]["overrides"] = {f"x;touch {marker}": {"inherits_from": "3d_fullres"}}


def _cli_config(ctx: Context) -> Command:
    work = ctx.root / f"w$(touch {ctx.marker})"
    config = raw_root_config(str(ctx.root / "work"), str(ctx.sandbox.rawcopy))
    ctx.sandbox.allow(work, ctx.root / "w$(touch ", ctx.root / "work")
    return workflow(
        ctx, config, PLANNED, "--config", f"work_dir={work}", names=("work_dir",),
        expected=plans_of(work),
    )  # fmt: skip


def _yaml_tag(ctx: Context) -> Command:
    """A config file whose value is a YAML tag that an unsafe loader would call."""
    import yaml

    config = raw_root_config(str(ctx.root / "work"), str(ctx.sandbox.rawcopy))
    del config["work_dir"]
    text = f'work_dir: !!python/object/apply:os.system ["touch {ctx.marker}"]\n'
    configfile = ctx.root / "snake" / "tagged.yaml"
    configfile.parent.mkdir(parents=True)
    configfile.write_text(text + yaml.safe_dump(config))
    config["work_dir"] = str(ctx.root / "work")
    return workflow(
        # Snakemake's own loader (safe YAML) refuses it before our code, as "Config file is not
        # valid JSON or YAML": the one --configfile given, so "Config file" names it
        ctx, config, PLANNED, names=(str(configfile), "tagged.yaml", "Config file"),
        configfile=configfile,
    )  # fmt: skip


def probes() -> list[Probe]:
    found = [raw_root_probe(n, t, e) for n, (t, e) in HOSTILE_PATHS.items()]
    found += [work_dir_probe(n, t, e) for n, (t, e) in HOSTILE_PATHS.items()]
    found += [
        Probe("raw_root_space", "config", RUN, "dataset.raw_root 'r data' beside a file 'r'",
              _raw_root_space),
        Probe("work_dir_space", "config", RUN, "work_dir 'fresh run' beside a file 'fresh'",
              _work_dir_space),
        Probe("work_dir_leading_dash", "config", REFUSAL,
              "work_dir '-rf x' (relative; a command would read it as an option)",
              _work_dir_dash),
        Probe("work_dir_space_predict", "config", RUN,
              "a trained run in 'wd mv' beside a folder 'wd' predicts (.partial cleared)",
              _work_dir_space_predict),
        Probe("trainer_path_substitution", "config", RUN,
              "training.trainer '<S>/w$(touch$IFS<M>)/t.py:SecTrainer' (the file exists)",
              _trainer_path),
        Probe("trainer_path_braces", "config", REFUSAL,
              "training.trainer '<S>/w$(touch${IFS}<M>)/t.py:SecTrainer' ({} are wildcards)",
              _trainer_path_braces),
        Probe("gpu_lock_dir_substitution", "config", RUN,
              "training.gpu_lock_dir '<S>/locks$(touch <M>)'", _gpu_lock_dir),
        refused_key("trainer_semicolon", "training.trainer 'nnUNetTrainer;touch <M>'", "trainer",
                    _set("training", "trainer", "nnUNetTrainer;touch {M}")),
        Probe("nsd_label_substitution", "config", REFUSAL,
              "evaluation.nsd_tolerance_mm {'a$(touch <M>)': 2} (no such label), to crossval",
              _nsd_crossval),
        refused_key("plans_name_shell", "planning.plans_name 'P;touch <M>'", "plans_name",
                    _set("planning", "plans_name", "P;touch {M}")),
        refused_key("dataset_name_shell", "dataset.name 'Synth$(touch <M>)'", "name",
                    _set("dataset", "name", "Synth$(touch {M})")),
        refused_key("overrides_name_shell", "planning.overrides {'x;touch <M>': ...}",
                    "overrides", _override),
        refused_key("epochs_huge", "training.epochs 10**30", "epochs",
                    _set("training", "epochs", 10**30)),
        refused_key("iterations_huge", "training.iterations_per_epoch 10**15",
                    "iterations_per_epoch", _set("training", "iterations_per_epoch", 10**15)),
        refused_key("num_folds_huge", "splits.num_folds 10**12", "num_folds",
                    _set("splits", "num_folds", 10**12)),
        Probe("config_cli_work_dir", "config", RUN,
              "--config 'work_dir=<S>/w$(touch <M>)' on Snakemake's command line", _cli_config),
        Probe("configfile_python_tag", "config", REFUSAL,
              "a configfile with work_dir: !!python/object/apply:os.system [touch <M>]",
              _yaml_tag),
    ]  # fmt: skip
    return found
