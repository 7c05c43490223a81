"""Malformed files where a command expects data: postprocessing JSON that is binary, a list or
names a function to call; an .npz with pickled object arrays; plans, dataset.json and
checkpoints that are not what they claim. Each is one line naming the file, never a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

from benchmarks.security import builders
from benchmarks.security.prepared import DATASET
from benchmarks.security.probe import REFUSAL, Command, Context, Probe
from benchmarks.security.runs import cli


def _postprocessing(content: bytes):
    def run(ctx: Context) -> Command:
        steps = ctx.root / "postprocessing.json"
        steps.write_bytes(content.replace(b"{M}", str(ctx.marker).encode()))
        args = ["apply-postprocessing", "-i", str(ctx.sandbox.rawcopy / DATASET / "labelsTs"),
                "-o", str(ctx.root / "out"), "-pp_pkl_file", str(steps), "-np", "1",
                "-dataset_json", str(ctx.sandbox.rawcopy / DATASET / "dataset.json")]  # fmt: skip
        return cli(ctx, args, names=(str(steps), "postprocessing.json", "os.system"))

    return run


def _object_npz(ctx: Context) -> Command:
    first = shutil.copytree(ctx.prepared.predictions, ctx.root / "pred_a")
    second = shutil.copytree(ctx.prepared.predictions, ctx.root / "pred_b")
    bad = builders.write_object_npz(second / "synth_t000.npz", ctx.marker)
    args = ["ensemble", "-i", str(first), str(second), "-o", str(ctx.root / "out"), "-np", "1"]
    return cli(ctx, args, names=(str(bad), "synth_t000.npz"))


def _model_file(name: str, content: bytes):
    def run(ctx: Context) -> Command:
        model = builders.copy_folder(ctx.prepared.model, ctx.root / "model")
        (model / name).write_bytes(content)
        out = ctx.root / "pred"
        args = ["predict", "-i", str(ctx.sandbox.rawcopy / DATASET / "imagesTs"), "-o", str(out),
                "-m", str(model), "-f", "0", "--disable_tta", "-device", "cpu", "-npp", "0",
                "-nps", "0"]  # fmt: skip
        return cli(ctx, args, names=(Path(name).name,))

    return run


BINARY = bytes(range(256)) * 4
CALL = b'{"postprocessing_fns": ["os.system"], "postprocessing_kwargs": [{"command": "touch {M}"}]}'


def probes() -> list[Probe]:
    return [
        Probe("postprocessing_binary", "malformed", REFUSAL, "postprocessing.json of binary bytes",
              _postprocessing(BINARY), fast=True),
        Probe("postprocessing_list", "malformed", REFUSAL, "postprocessing.json holding [1, 2]",
              _postprocessing(b"[1, 2]"), fast=True),
        Probe("postprocessing_calls_os_system", "malformed", REFUSAL,
              "postprocessing.json naming os.system as a step", _postprocessing(CALL), fast=True),
        Probe("npz_object_array", "malformed", REFUSAL,
              "ensemble of an .npz whose array is a pickled os.system call", _object_npz),
        Probe("plans_json_list", "malformed", REFUSAL, "a model's plans.json holding []",
              _model_file("plans.json", b"[]")),
        Probe("dataset_json_binary", "malformed", REFUSAL, "a model's dataset.json of binary bytes",
              _model_file("dataset.json", BINARY)),
        Probe("checkpoint_garbage", "malformed", REFUSAL, "a checkpoint_final.pth of binary bytes",
              _model_file("fold_0/checkpoint_final.pth", BINARY)),
    ]  # fmt: skip
