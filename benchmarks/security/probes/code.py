"""Code a model folder carries (trainer source, pickled checkpoints) and the GPU lock folder.

Carried trainer code runs only with ``--trust-model-code`` and only while its sha256 is the
recorded one; a checkpoint is never unpickled beyond tensors; a lock file is never followed
through a link, and a lock folder others can write is refused."""

from __future__ import annotations

from pathlib import Path

from benchmarks.security import builders
from benchmarks.security.prepared import DATASET
from benchmarks.security.probe import REFUSAL, RUN, Command, Context, Probe
from benchmarks.security.runs import cli

TRUST = "--trust-model-code"


def _model(ctx: Context) -> Path:
    return builders.copy_folder(ctx.prepared.model, ctx.root / "model")


def _predict_model(ctx: Context, model: Path, *extra: str, names=(), expected=False) -> Command:
    out = ctx.root / "pred"
    args = ["predict", "-i", str(ctx.sandbox.rawcopy / DATASET / "imagesTs"), "-o", str(out),
            "-m", str(model), "-f", "0", "--disable_tta", "-device", "cpu", "-npp", "0",
            "-nps", "0", *extra]  # fmt: skip
    allow = (out,) if expected else ()
    return cli(ctx, args, names=names, expected=out / "synth_t000.nii.gz" if expected else None,
               allow=allow)  # fmt: skip


def _untrusted(ctx: Context) -> Command:
    model = builders.carry_code(_model(ctx), builders.evil_source(ctx.marker))
    return _predict_model(ctx, model, names=("carried.py", TRUST))


def _tampered(ctx: Context) -> Command:
    model = builders.carry_code(
        _model(ctx), builders.evil_source(ctx.marker), recorded=builders.BENIGN_SOURCE
    )
    return _predict_model(ctx, model, TRUST, names=("sha256", "carried.py"))


def _trusted(ctx: Context) -> Command:
    model = builders.carry_code(_model(ctx), builders.BENIGN_SOURCE)
    command = _predict_model(ctx, model, TRUST, expected=True)

    def named(outcome) -> list[str]:
        if "carried.py" not in outcome.stderr or "sha256" not in outcome.stderr:
            return ["the trusted run did not name the code it ran and its sha256 on stderr"]
        return []

    command.after = named
    return command


def _pickle_checkpoint(ctx: Context) -> Command:
    model = _model(ctx)
    builders.write_pickle_checkpoint(model / "fold_0" / "checkpoint_final.pth", ctx.marker)
    return _predict_model(ctx, model, names=("checkpoint_final.pth",))


def _train_locks(ctx: Context, locks: Path, names: tuple[str, ...]) -> Command:
    """``nnunet-core train`` taking a GPU slot (one GPU claimed by ``$nnUNet_num_gpus``) in
    ``locks``; the preprocessed root does not exist, so a train past the lock fails otherwise."""
    env = {**ctx.env, "nnUNet_num_gpus": "1"}
    args = ["train", "900", "3d_fullres", "0", "--gpu-lock-dir", str(locks), "-device", "auto",
            "--preprocessed", str(ctx.root / "nothing"), "--results", str(ctx.root / "nothing"),
            "--raw", str(ctx.sandbox.rawcopy)]  # fmt: skip
    return cli(ctx, args, names=names, env=env)


def _lock_link(ctx: Context) -> Command:
    locks = ctx.root / "locks"
    locks.mkdir(mode=0o700)
    (locks / "gpu_0.lock").symlink_to(ctx.root / "decoy" / "victim.txt")
    return _train_locks(ctx, locks, ("gpu_0.lock",))


def _lock_world_writable(ctx: Context) -> Command:
    locks = ctx.root / "locks"
    locks.mkdir()
    locks.chmod(0o777)
    return _train_locks(ctx, locks, (str(locks), "locks"))


def _lock_folder_link(ctx: Context) -> Command:
    locks = ctx.root / "locks"
    locks.symlink_to(ctx.root / "decoy" / "sub")
    return _train_locks(ctx, locks, (str(locks), "locks"))


def probes() -> list[Probe]:
    return [
        Probe("code_untrusted_trainer_source", "model code", REFUSAL,
              "predict -m a folder carrying trainer code (creates the marker), no " + TRUST,
              _untrusted),
        Probe("code_tampered_source", "model code", REFUSAL,
              f"{TRUST} with a carried source whose sha256 is not the record's", _tampered),
        Probe("code_trusted_source", "model code", RUN,
              f"{TRUST} with a matching carried source: runs, naming file and sha256", _trusted),
        Probe("checkpoint_pickle_reduce", "model code", REFUSAL,
              "checkpoint_final.pth whose pickle REDUCEs to os.system", _pickle_checkpoint),
        Probe("lock_file_symlink", "locks", REFUSAL,
              "gpu_0.lock -> the user's 0600 victim.txt in the lock folder", _lock_link,
              fast=True),
        Probe("lock_folder_world_writable", "locks", REFUSAL, "a lock folder of mode 0777",
              _lock_world_writable, fast=True),
        Probe("lock_folder_symlink", "locks", REFUSAL, "a lock folder that is a link",
              _lock_folder_link, fast=True),
    ]  # fmt: skip
