"""Paths that overlap what a run must never touch: a work_dir at ``/``, the home folder, inside
the raw data (or the raw data inside it), a folder holding a dataset; predictions, ensembles and
postprocessed segmentations aimed at a raw dataset's images or labels or at a folder of the user's
files; odd names of inputs and outputs that must simply work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchmarks.security.prepared import DATASET, predict_args, raw_root_config
from benchmarks.security.probe import REFUSAL, RUN, Command, Context, Probe
from benchmarks.security.runs import cli, plans_of, workflow

PLANNED = ["planned"]


def _overlap(work: str, raw_root: str, *extra: str, env: dict | None = None):
    """A workflow whose work_dir overlaps the user's data: refused before any job, so only
    Snakemake's own folder may change."""

    def run(ctx: Context) -> Command:
        config = raw_root_config(work.format(S=ctx.root), raw_root.format(S=ctx.root))
        if env:
            ctx.env.update({k: v.format(S=ctx.root) for k, v in env.items()})
        command = workflow(ctx, config, PLANNED, *extra, names=("work_dir", "raw_root"))
        ctx.sandbox.allowed = [ctx.root / "snake"]
        return command

    return run


def _raw_root_in_work_dir(ctx: Context) -> Command:
    """Snakemake saw a cycle, went on and deleted the raw dataset.json (the issue)."""
    shutil.copytree(ctx.prepared.raw, ctx.root / "X" / "preprocessed" / DATASET)
    return _overlap("{S}/X", "{S}/X/preprocessed")(ctx)


def _work_dir_holds_dataset(ctx: Context) -> Command:
    other = ctx.root / "data" / "Dataset901_Other"
    shutil.copytree(ctx.prepared.raw, other)
    return _overlap("{S}/data", "{S}/rawcopy")(ctx)


def _raw(ctx: Context, part: str) -> Path:
    return ctx.sandbox.rawcopy / DATASET / part


def _predict_into(source: str, target: str):
    def run(ctx: Context) -> Command:
        args = predict_args(_raw(ctx, source), _raw(ctx, target), ctx.prepared.results)
        return cli(ctx, args, names=(target,))

    return run


def _predictions(ctx: Context, name: str) -> Path:
    return shutil.copytree(ctx.prepared.predictions, ctx.root / name)


def _ensemble_into_labels(ctx: Context) -> Command:
    inputs = [_predictions(ctx, "pred_a"), _predictions(ctx, "pred_b")]
    args = ["ensemble", "-i", *map(str, inputs), "-o", str(_raw(ctx, "labelsTs")), "-np", "1"]
    return cli(ctx, args, names=("labelsTs",))


def _postprocess_into_images(ctx: Context) -> Command:
    predictions = _predictions(ctx, "pred_a")
    args = ["apply-postprocessing", "-i", str(predictions), "-o", str(_raw(ctx, "imagesTs")),
            "-pp_pkl_file", str(ctx.prepared.postprocessing), "-np", "1"]  # fmt: skip
    return cli(ctx, args, names=("imagesTs",))


def _predict_foreign_output(ctx: Context) -> Command:
    """-o holds a user's files, one named like a prediction; no --overwrite."""
    out = ctx.root / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's notes\n")
    shutil.copy(_raw(ctx, "labelsTs") / "synth_t000.nii.gz", out / "synth_t000.nii.gz")
    args = predict_args(_raw(ctx, "imagesTs"), out, ctx.prepared.results)
    return cli(ctx, args, names=(str(out), "out", "synth_t000", "notes.txt", "--overwrite"))


def _predict_odd_names(ctx: Context) -> Command:
    images = shutil.copytree(_raw(ctx, "imagesTs"), ctx.root / f"in `touch {ctx.marker}`;x")
    out = ctx.root / f"out $(touch {ctx.marker}) 'q\" ü"
    args = predict_args(images, out, ctx.prepared.results)
    return cli(ctx, args, expected=out / "synth_t000.nii.gz", allow=(out,))


CASE_NAMES = ("a$(touch PWNED)", "b c", "d'e\"f`touch PWNED`")


def _raw_case_names(ctx: Context) -> Command:
    """Training cases renamed (images and labels): names are data, never shell words; a
    relative ``touch PWNED`` would land in a job's working folder, inside the sandbox."""
    raw_root = ctx.root / "oddraw"
    dataset = shutil.copytree(ctx.prepared.raw, raw_root / DATASET)
    meta = json.loads((dataset / "dataset.json").read_text())
    ending = meta.get("file_ending", ".nii.gz")
    cases = sorted(p.name[: -len(ending)] for p in (dataset / "labelsTr").glob(f"*{ending}"))
    for old, new in zip(cases, CASE_NAMES, strict=False):
        for image in (dataset / "imagesTr").glob(f"{old}_*{ending}"):
            channel = image.name[len(old) : -len(ending)]
            image.rename(dataset / "imagesTr" / f"{new}{channel}{ending}")
        (dataset / "labelsTr" / f"{old}{ending}").rename(dataset / "labelsTr" / f"{new}{ending}")
    work = ctx.root / "work"
    config = raw_root_config(str(work), str(raw_root))
    return workflow(ctx, config, PLANNED, names=CASE_NAMES, expected=plans_of(work))


def probes() -> list[Probe]:
    return [
        Probe("work_dir_is_root", "paths", REFUSAL, "work_dir '/' (dry run)",
              _overlap("/", "{S}/rawcopy", "-n")),
        Probe("work_dir_is_home", "paths", REFUSAL, "work_dir = $HOME (a sandbox folder)",
              _overlap("{S}/home", "{S}/rawcopy", env={"HOME": "{S}/home"})),
        Probe("work_dir_inside_raw_root", "paths", REFUSAL, "work_dir '<raw_root>/run'",
              _overlap("{S}/rawcopy/run", "{S}/rawcopy")),
        Probe("work_dir_is_raw_root", "paths", REFUSAL, "work_dir = raw_root",
              _overlap("{S}/rawcopy", "{S}/rawcopy")),
        Probe("raw_root_inside_work_dir", "paths", REFUSAL,
              "raw_root '<work_dir>/preprocessed' holding the raw dataset", _raw_root_in_work_dir),
        Probe("work_dir_holds_dataset", "paths", REFUSAL,
              "work_dir holding a raw dataset Dataset901_Other", _work_dir_holds_dataset),
        Probe("predict_into_labelsTr", "paths", REFUSAL,
              "predict -i raw/imagesTr -o raw/labelsTr", _predict_into("imagesTr", "labelsTr")),
        Probe("predict_into_imagesTs", "paths", REFUSAL,
              "predict -i raw/imagesTs -o raw/imagesTs", _predict_into("imagesTs", "imagesTs")),
        Probe("ensemble_into_labelsTs", "paths", REFUSAL, "ensemble -o raw/labelsTs",
              _ensemble_into_labels),
        Probe("postprocess_into_imagesTs", "paths", REFUSAL,
              "apply-postprocessing -o raw/imagesTs", _postprocess_into_images),
        Probe("predict_foreign_output", "paths", REFUSAL,
              "predict -o a folder of the user's files (one named like a case), no --overwrite",
              _predict_foreign_output),
        Probe("predict_odd_names", "paths", RUN,
              "predict -i 'in `touch M`;x' -o \"out $(touch M) 'q\\\" ü\"", _predict_odd_names),
        Probe("raw_case_names", "paths", RUN,
              "raw training cases named 'a$(touch PWNED)', 'b c', 'd'e\"f`touch PWNED`'",
              _raw_case_names),
    ]  # fmt: skip
