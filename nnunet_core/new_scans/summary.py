"""The prediction mode's last job: ``summary.tsv``, ``failed.tsv`` and the montage.

``python -m nnunet_core.new_scans.summary RUN_DIR DONE``. Reads the records the shard jobs wrote
into the output folder (only those made with this run's key), writes the tables and the montage
and says where they are. When cases failed, each is listed with its reason and the job exits 2
(a user's data, which a retry would not fix), so the run ends non-zero; ``DONE`` is written only
when every case was predicted.
"""

from __future__ import annotations

import sys
from pathlib import Path

from nnunet_core.dataset.discovery import case_identifiers
from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import read_json, write_json
from nnunet_core.layout.new_scans import MONTAGE_PNG, QC_FOLDER, SPEC_JSON, qc_png_path


def summarize(run_dir: Path, done: Path) -> int:
    from nnunet_core.new_scans.montage import write_montage
    from nnunet_core.new_scans.quality import read_records, write_failed, write_summary

    spec = read_json(run_dir / SPEC_JSON)
    output = Path(spec["output"])
    present = set(case_identifiers(Path(spec["input"]), spec["file_ending"]))
    records, failures = read_records(output, spec["key"])
    records = [r for r in records if r["case"] in present]
    failures = [f for f in failures if f["case"] in present]
    summary = write_summary(output, records)
    failed = write_failed(output, failures)
    pngs = [p for r in records if (p := qc_png_path(output, r["case"])).is_file()]
    montage = write_montage(pngs, output / QC_FOLDER / MONTAGE_PNG) if pngs else None
    flagged = sum(1 for r in records if r.get("flags"))
    print(f"{len(records)} case(s) segmented in {output}; figures per case: {summary}", flush=True)
    if montage is not None:
        print(f"overlays: {montage}", flush=True)
    if flagged:
        print(f"{flagged} case(s) flagged (empty, or a label volume outside training's range): "
              f"see the flags column of {summary}", flush=True)  # fmt: skip
    if failures:
        for failure in failures:
            print(f"case {failure['case']}: {failure['reason']}", file=sys.stderr)
        msg = (
            f"{len(failures)} case(s) failed, listed in {failed}; fix or remove them and run the "
            "same command again (the cases already segmented are kept)"
        )
        raise DatasetError(msg)
    write_json(done, {"cases": len(records)})
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        return summarize(Path(args[0]), Path(args[1]))
    except DatasetError as exc:
        print(f"nnunet-core predict: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
