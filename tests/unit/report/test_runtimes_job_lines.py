"""Job times from a Snakemake log whose rules print one line per job (their `message`, the
default profile's console), as from one with Snakemake's full job blocks."""

from __future__ import annotations

from pathlib import Path

from nnunet_core.report.runtimes import snakemake_log_rows

ONE_LINE_PER_JOB = """\
[Wed Dec  2 13:16:47 2026]
Job 7: crossval configuration=3d_fullres, log: /w/logs/D/crossval_3d_fullres.log
[Wed Dec  2 13:16:48 2026]
Job 8: ensemble_cv first=2d,second=3d_fullres, log: /w/logs/D/ensemble_cv_2d_3d_fullres.log
[Wed Dec  2 13:16:49 2026]
Job 9: select, log: /w/logs/D/select.log
[Wed Dec  2 13:17:05 2026]
Finished jobid: 7 (Rule: crossval)
1 of 4 steps (25%) done
[Wed Dec  2 13:17:09 2026]
Finished jobid: 8 (Rule: ensemble_cv)
[Wed Dec  2 13:19:49 2026]
Finished jobid: 9 (Rule: select)
[Wed Dec  2 13:19:50 2026]
Job 0: all
"""


def test_one_line_jobs_are_timed_with_their_rule_and_wildcards(tmp_path: Path) -> None:
    log = tmp_path / "run.snakemake.log"
    log.write_text(ONE_LINE_PER_JOB)
    rows = {row["job"]: (row["stage"], row["seconds"]) for row in snakemake_log_rows(log)}
    assert rows == {
        "crossval [configuration=3d_fullres]": ("crossval", 18.0),
        "ensemble_cv [first=2d, second=3d_fullres]": ("ensemble_cv", 21.0),
        "select": ("select", 180.0),
    }  # `all` never finished: left out
