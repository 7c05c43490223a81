"""Model zips: members that leave the results root, replace or take over an installed model,
bombs by declared size and by ratio, a link member, a killed install's staging folder."""

from __future__ import annotations

import os
import time
from pathlib import Path

from benchmarks.security import builders
from benchmarks.security.commands import nnunet_core
from benchmarks.security.prepared import DATASET, MODEL, predict_args
from benchmarks.security.probe import REFUSAL, RUN, Command, Context, Probe
from benchmarks.security.runs import cli

INSTALL = "install-pretrained-model-from-zip"
MEMBER = f"{DATASET}/{MODEL}"


def _install(ctx: Context, archive: Path, results: Path, *extra: str, names=(), **kw) -> Command:
    return cli(ctx, [INSTALL, str(archive), "--results", str(results), *extra],
               names=(str(archive), archive.name, *names), **kw)  # fmt: skip


def _empty_results(ctx: Context) -> Path:
    results = ctx.root / "results"
    results.mkdir()
    return results


def _outside_member(name: str):
    def run(ctx: Context) -> Command:
        archive = builders.write_zip(
            ctx.root / "model.zip",
            {f"{MEMBER}/plans.json": b"{}", name.format(S=ctx.root): b"escaped\n"},
        )
        return _install(ctx, archive, _empty_results(ctx))

    return run


def _takeover(ctx: Context) -> Command:
    """trainer.json + trainer_source/x.py added to an installed built-in model; then a plain
    predict must not run x.py."""
    results = ctx.prepared.copy_results(ctx.root / "results")
    source = builders.evil_source(ctx.marker)
    record = builders.trainer_record("x.py", source)
    import json

    archive = builders.write_zip(
        ctx.root / "takeover.zip",
        {f"{MEMBER}/trainer.json": json.dumps(record).encode(),
         f"{MEMBER}/trainer_source/x.py": source.encode()},
    )  # fmt: skip
    command = _install(ctx, archive, results, names=("trainer.json", "trainer_source", MODEL))
    out = ctx.root / "pred"

    def predict_after(_outcome) -> list[str]:
        ran = nnunet_core(predict_args(ctx.sandbox.rawcopy / DATASET / "imagesTs", out, results),
                          ctx.root, ctx.env)  # fmt: skip
        if ran.returncode != 0:
            return [f"the plain predict after the refused install failed: {ran.refusal_line()}"]
        return []

    ctx.sandbox.allow(out)
    command.after = predict_after
    return command


def _replace(overwrite: bool):
    def run(ctx: Context) -> Command:
        results = ctx.prepared.copy_results(ctx.root / "results")
        plans = (ctx.prepared.model / "plans.json").read_text().replace("{", "{\n", 1)
        archive = builders.write_zip(
            ctx.root / "model.zip", {f"{MEMBER}/plans.json": plans.encode()}
        )
        if not overwrite:
            return _install(ctx, archive, results, names=("plans.json", "--overwrite"))
        command = _install(ctx, archive, results, "--overwrite",
                           expected=results / MEMBER / "plans.json", allow=(results,))  # fmt: skip

        def listed(outcome) -> list[str]:
            if "plans.json" not in outcome.text:
                return ["--overwrite replaced plans.json without listing it"]
            return []

        command.after = listed
        return command

    return run


def _declared_bomb(ctx: Context) -> Command:
    archive = builders.write_declared_bomb(ctx.root / "bomb.zip", MEMBER, 16, 0xFFFFFFF0)
    return _install(ctx, archive, _empty_results(ctx), names=("GiB", "size", "bomb.zip"))


def _ratio_bomb(ctx: Context) -> Command:
    archive = builders.write_ratio_bomb(ctx.root / "ratio.zip", f"{MEMBER}/big.bin", 64 << 20)
    return _install(ctx, archive, _empty_results(ctx), names=("ratio", "big.bin"))


def _link_member(ctx: Context) -> Command:
    """A member that is a symbolic link to the user's notes: never a link in the results (it
    may come out as a plain file holding the target's name)."""
    results = _empty_results(ctx)
    archive = builders.write_link_zip(ctx.root / "link.zip", f"{MEMBER}/notes.txt",
                                      str(ctx.root / "decoy" / "notes.txt"))  # fmt: skip
    command = _install(ctx, archive, results, names=("link", "notes.txt"), allow=(results,))

    def no_link(_outcome) -> list[str]:
        links = [p for p in results.rglob("*") if p.is_symlink()]
        return [f"a link was installed: {p}" for p in links]

    command.after = no_link
    return command


def _stale_staging(ctx: Context) -> Command:
    """A killed install's hidden staging folder (its pid gone, an hour old) is removed."""
    results = _empty_results(ctx)
    stale = results / ".install-deadhost-999999-abcd1234"
    (stale / "tree" / DATASET).mkdir(parents=True)
    (stale / "tree" / DATASET / "half.bin").write_bytes(bytes(1 << 20))
    hour_ago = time.time() - 3600
    for path in [stale / "tree" / DATASET / "half.bin", stale / "tree" / DATASET, stale / "tree",
                 stale]:  # fmt: skip
        os.utime(path, (hour_ago, hour_ago))
    command = _install(ctx, ctx.prepared.model_zip, results,
                       expected=results / MEMBER / "plans.json", allow=(results,))  # fmt: skip

    def cleared(_outcome) -> list[str]:
        left = sorted(p.name for p in results.glob(".install-*"))
        return [f"staging folders left in the results: {left}"] if left else []

    command.after = cleared
    return command


def _odd_results(ctx: Context) -> Command:
    results = ctx.root / f"res $(touch {ctx.marker}) 'q"
    return _install(ctx, ctx.prepared.model_zip, results,
                    expected=results / MEMBER / "plans.json", allow=(results,))  # fmt: skip


def _not_a_zip(ctx: Context) -> Command:
    archive = ctx.root / "model.zip"
    archive.write_text(f"$(touch {ctx.marker})\n")
    return _install(ctx, archive, _empty_results(ctx))


def probes() -> list[Probe]:
    return [
        Probe("zip_dotdot_member", "zips", REFUSAL, "a member '../PWNED'",
              _outside_member("../PWNED"), fast=True),
        Probe("zip_absolute_member", "zips", REFUSAL, "a member '<S>/PWNED'",
              _outside_member("{S}/PWNED"), fast=True),
        Probe("zip_takeover_builtin", "zips", REFUSAL,
              "trainer.json + trainer_source/x.py into an installed built-in model, then predict",
              _takeover),
        Probe("zip_replace_without_overwrite", "zips", REFUSAL,
              "a member replacing an installed plans.json, no --overwrite", _replace(False)),
        Probe("zip_replace_with_overwrite", "zips", RUN,
              "the same with --overwrite: installed, plans.json listed", _replace(True)),
        Probe("zip_declared_size_bomb", "zips", REFUSAL,
              "16 members of 16 bytes declaring 4 GiB each", _declared_bomb, fast=True),
        Probe("zip_ratio_bomb", "zips", REFUSAL, "a 64 MiB member of zeros (about 1000:1)",
              _ratio_bomb),
        Probe("zip_link_member", "zips", RUN,
              "a symbolic link member to the user's notes (never installed as a link)",
              _link_member, fast=True),
        Probe("zip_stale_staging", "zips", RUN,
              "a killed install's .install-* folder, then a good install", _stale_staging),
        Probe("zip_install_odd_results", "zips", RUN,
              "--results \"res $(touch M) 'q\"", _odd_results),
        Probe("zip_not_a_zip", "zips", REFUSAL, "a text file named model.zip", _not_a_zip,
              fast=True),
    ]  # fmt: skip
