"""`nnunet-core status`: the work_dir from the argument or from the config file, one line when
the folder is no workflow's work_dir."""

from __future__ import annotations

from pathlib import Path

from nnunet_core import cli

EPOCH = "2026-12-06 00:38:10: epoch 2/5: 5.02 s; ETA 0:00:15 (about 2026-12-06 00:38)"


def work_dir(root: Path) -> Path:
    logs = root / "w" / "logs" / "Dataset900_Synth"
    logs.mkdir(parents=True)
    (logs / "train_2d_fold3.log").write_text(EPOCH + "\n")
    (logs / "plan.log").write_text("planned\n")  # not a fold or prediction job: not listed
    return root / "w"


def test_the_work_dir_comes_from_the_config_file(tmp_path: Path, capsys) -> None:
    work = work_dir(tmp_path)
    config = tmp_path / "my.yaml"
    config.write_text(f"work_dir: {work}\ndataset: {{id: 900, name: Synth}}\n")
    assert cli.main(["status", "--configfile", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{work / 'logs' / 'Dataset900_Synth'}:"
    assert lines[1].startswith("  train 2d fold 3  epoch 2/5  running  ETA 0:00:15 (about ")
    assert len(lines) == 2


def test_a_folder_without_logs_is_one_line(tmp_path: Path, capsys) -> None:
    assert cli.main(["status", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"nnunet-core status: error: {tmp_path}: no logs/ folder here: not a "
                   "workflow's work_dir, or nothing ran yet"]  # fmt: skip
