"""The security campaign's checks can fail (benchmarks/security/): the marker search, the decoy
tree's before/after comparison, the one-line-refusal and correct-run judgements; the campaign
has at least 40 uniquely named probes; and a handful of its fast probes (the CLI alone, on a
synthesized raw dataset, no training) run for real and hold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.security.campaign import run_probe, table
from benchmarks.security.outcome import REFUSAL, RUN, Outcome, judge
from benchmarks.security.prepared import DATASET, Prepared
from benchmarks.security.probes import all_probes
from benchmarks.security.sandbox import (
    MARKER,
    decoy_changes,
    make_sandbox,
    markers_found,
    snapshot,
)

FAST = ("zip_dotdot_member", "zip_absolute_member", "zip_not_a_zip", "lock_file_symlink",
        "postprocessing_binary")  # fmt: skip


@pytest.fixture(scope="module")
def raw_dataset(tmp_path_factory) -> Path:
    """A tiny synthetic raw dataset (2 + 1 cases), written by the real CLI."""
    work = tmp_path_factory.mktemp("security") / "work"
    target = work / "raw" / DATASET
    sizes = ["--num-training", "2", "--num-test", "1", "--shape", "8", "16", "16"]
    command = [str(Path(sys.executable).parent / "nnunet-core"), "synthesize", "--output"]
    command += [str(target), *sizes]
    subprocess.run(command, check=True, capture_output=True)
    return target


def test_the_marker_search_finds_a_marker_at_any_depth_but_not_a_folder(tmp_path) -> None:
    assert markers_found(tmp_path) == []
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / MARKER).mkdir()  # a folder named like it (a path part of a hostile value)
    (tmp_path / "a" / "b" / f"{MARKER})").write_text("")
    assert markers_found(tmp_path) == []
    (tmp_path / "a" / "b" / MARKER).write_text("")
    assert markers_found(tmp_path) == [tmp_path / "a" / "b" / MARKER]


def test_the_decoy_check_finds_changed_modes_contents_links_and_added_files(
    tmp_path, raw_dataset
) -> None:
    sandbox = make_sandbox(tmp_path / "s", raw_dataset)
    run = sandbox.root / "run"
    sandbox.allow(run / "deep")
    before = snapshot(sandbox.root)
    assert decoy_changes(sandbox.root, before, snapshot(sandbox.root), sandbox.allowed) == []
    (run / "deep" / "out").mkdir(parents=True)  # the run's own folder, and the way to it
    (run / "deep" / "out" / "x.txt").write_text("the run's")
    assert decoy_changes(sandbox.root, before, snapshot(sandbox.root), sandbox.allowed) == []
    (sandbox.root / "decoy" / "victim.txt").chmod(0o666)
    (sandbox.root / "fresh").write_text("overwritten by > {log}")
    (sandbox.root / "decoy" / "link").unlink()
    (sandbox.root / "decoy" / "link").symlink_to("/etc/passwd")
    (sandbox.rawcopy / DATASET / "labelsTr" / "extra.nii.gz").write_text("")
    (run / "stray.txt").write_text("outside the run's folder")
    (sandbox.root / "wd" / "user.txt").unlink()
    problems = decoy_changes(sandbox.root, before, snapshot(sandbox.root), sandbox.allowed)
    assert problems == [
        "changed (content): 'decoy/link'",
        "changed (mode): 'decoy/victim.txt'",
        "changed (content): 'fresh'",
        "removed: 'wd/user.txt'",
        f"added: 'rawcopy/{DATASET}/labelsTr/extra.nii.gz'",
        "added: 'run/stray.txt'",
    ]


def outcome(returncode: int, stderr: str, *, cli: bool = True, stdout: str = "") -> Outcome:
    return Outcome(["x"], returncode, stdout, stderr, 0.1, cli)


def test_the_refusal_judge_wants_one_error_line_naming_the_value_and_no_traceback() -> None:
    names = ("labelsTr",)
    line = "nnunet-core predict: error: -o /d/labelsTr is a raw dataset's labels folder"
    assert judge(outcome(2, line + "\n"), REFUSAL, names, None) is None
    assert judge(outcome(0, ""), REFUSAL, names, None).startswith("exit 0")
    traceback = "Traceback (most recent call last):\n  File x\nValueError: boom\n"
    assert "traceback" in judge(outcome(1, traceback), REFUSAL, names, None)
    assert "names none" in judge(
        outcome(2, "nnunet-core predict: error: no\n"), REFUSAL, names, None
    )
    assert "not one" in judge(outcome(2, f"{line}\n{line}\n"), REFUSAL, names, None)
    snake = "ConfigurationError in file Snakefile:\ninvalid config: work_dir: '/' is refused\n"
    assert judge(outcome(1, snake, cli=False), REFUSAL, ("work_dir",), None) is None
    parsed = "Using workflow specific profile profiles/default\ninvalid config: work_dir: '/'\n"
    assert judge(outcome(2, parsed, cli=False), REFUSAL, ("work_dir",), None) is None
    assert "names none" in judge(outcome(2, parsed, cli=False), REFUSAL, ("raw_root",), None)
    job = "Job 1: plan, log: /s/work/logs/plan.log (work_dir /s/work)\nError in rule plan:\n"
    assert "names none" in judge(outcome(1, job, cli=False), REFUSAL, ("work_dir",), None)


def test_the_run_judge_wants_exit_0_and_the_expected_file(tmp_path) -> None:
    expected = tmp_path / "plans.json"
    assert "not written" in judge(outcome(0, ""), RUN, (), expected)
    expected.write_text("{}")
    assert judge(outcome(0, ""), RUN, (), expected) is None
    assert judge(outcome(2, "nnunet-core x: error: no\n"), RUN, (), expected).startswith("exit 2")
    stdout = "Traceback (most recent call last):\n"
    assert "traceback" in judge(outcome(0, "", stdout=stdout), RUN, (), expected)


def test_the_campaign_has_at_least_40_uniquely_named_probes_of_every_kind() -> None:
    probes = all_probes()
    names = [p.name for p in probes]
    assert len(probes) >= 40 and len(set(names)) == len(names)
    assert {p.kind for p in probes} == {"config", "paths", "zips", "model code", "locks",
                                        "malformed"}  # fmt: skip
    assert {p.expect for p in probes} == {REFUSAL, RUN}
    assert set(FAST) <= {p.name for p in probes if p.fast}


def test_fast_probes_hold_for_real(tmp_path, raw_dataset) -> None:
    """A few CLI probes on the real commands: refused in one line, no marker, decoys intact."""
    prepared = Prepared(tmp_path, raw_dataset.parents[1])
    chosen = [p for p in all_probes() if p.name in FAST]
    results = [run_probe(probe, prepared, tmp_path) for probe in chosen]
    assert [r.name for r in results if not r.ok] == [], table(results)
    assert all(r.outcome.startswith("refusal") for r in results), table(results)
