"""Several datasets and seeds in one config: which runs they become, each run's own config, and
where each run's files go (the workflow's paper.smk and run_paths.py use exactly these)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from nnunet_core.errors import ConfigurationError
from nnunet_core.workflow.config import schema_errors
from nnunet_core.workflow.runs import (
    RunTree,
    as_single_run,
    check_run_keys,
    incomplete_test_set_notice,
    is_several_runs,
    paper_table_flags,
    raw_root_of,
    run_instances,
)
from nnunet_core.workflow.runs import test_set_of as has_test_images_and_labels
from tests.helpers.workflow import REPO, SCHEMA

SYNTHETIC_3D = {"enabled": True, "num_test": 2, "shape": [12, 32, 32]}


def paper_config(seeds=(0, 1)) -> dict:
    return {
        "work_dir": "w",
        "datasets": [
            {"id": 901, "name": "Liver", "synthetic": SYNTHETIC_3D,
             "planning": {"configurations": ["3d_fullres"]}},
            {"id": 902, "name": "Hippo-2D", "raw_root": "/data/raw",
             "planning": {"planner": "ResEncM"}},
        ],
        "seeds": list(seeds),
        "planning": {"planner": "default", "gpu_memory_target_gb": 4},
        "training": {"epochs": 3},
    }  # fmt: skip


def test_each_dataset_and_seed_is_a_run_with_its_own_config() -> None:
    runs = run_instances(paper_config())
    assert [(r.name, r.dataset, r.seed) for r in runs] == [
        ("Dataset901_Liver_seed0", "Dataset901_Liver", 0),
        ("Dataset901_Liver_seed1", "Dataset901_Liver", 1),
        ("Dataset902_Hippo_2D_seed0", "Dataset902_Hippo-2D", 0),
        ("Dataset902_Hippo_2D_seed1", "Dataset902_Hippo-2D", 1),
    ]
    liver, hippo = runs[1].config, runs[3].config
    assert liver["dataset"] == {"id": 901, "name": "Liver", "synthetic": SYNTHETIC_3D}
    assert "datasets" not in liver and liver["seed"] == 1 and liver["seeds"] == [0, 1]
    # the entry's planning keys over the shared ones
    assert liver["planning"] == {
        "planner": "default", "gpu_memory_target_gb": 4, "configurations": ["3d_fullres"]
    }  # fmt: skip
    assert hippo["planning"] == {"planner": "ResEncM", "gpu_memory_target_gb": 4}
    assert liver["training"] == {"epochs": 3}
    # each run's config is its own: changing one leaves the others alone
    liver["training"]["epochs"] = 9
    assert runs[0].config["training"]["epochs"] == 3


def test_a_run_config_passes_the_schema() -> None:
    for run in run_instances(paper_config()):
        assert schema_errors(run.config, SCHEMA) == []


def test_one_dataset_and_one_seed_is_the_plain_run() -> None:
    plain = {"dataset": {"id": 4, "name": "Hippocampus"}, "seed": 3}
    assert not is_several_runs(plain)
    assert not is_several_runs({**plain, "seeds": None})
    one = paper_config(seeds=[5])
    one["datasets"] = one["datasets"][:1]
    assert not is_several_runs(one)
    as_single_run(one)
    assert "datasets" not in one and "seeds" not in one
    assert one["seed"] == 5 and one["dataset"]["name"] == "Liver"
    assert one["planning"]["configurations"] == ["3d_fullres"]
    assert one["planning"]["gpu_memory_target_gb"] == 4
    assert is_several_runs(paper_config(seeds=[5]))  # two datasets
    assert is_several_runs({"dataset": plain["dataset"], "seeds": [0, 1]})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"dataset": {"id": 1, "name": "A"}, "datasets": [{"id": 2, "name": "B"}]},
         "set dataset (one) or datasets (several), not both"),
        ({"seed": 0}, "name a dataset"),
        ({"dataset": {"id": 1, "name": "A"}, "seed": 0, "seeds": [0, 1]},
         "set seed or seeds, not both (seeds: [0, 1] runs every seed)"),
        ({"datasets": [{"id": 2, "name": "B"}, {"id": 2, "name": "C"}]},
         "dataset id 2 given twice"),
    ],
)  # fmt: skip
def test_conflicting_run_keys_are_one_line(config: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^config") as caught:
        check_run_keys(config)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_schema_names_a_repeated_seed_and_a_wrong_dataset_key() -> None:
    config = paper_config(seeds=[1, 1])
    config["datasets"][0]["planner"] = "ResEncL"  # belongs under planning
    errors = schema_errors(config, SCHEMA)
    assert any(e.startswith("seeds: ") and "non-unique" in e for e in errors), errors
    assert any(e.startswith("datasets.0.planner: unknown key") for e in errors), errors


def test_one_seed_keeps_upstreams_tree_and_several_get_a_folder_each() -> None:
    plain = RunTree.of_config(
        {"work_dir": "w", "dataset": {"id": 4, "name": "H", "raw_root": "/data/raw"}, "seed": 3}
    )
    assert plain.results_dir == Path("w/results/Dataset004_H")
    assert plain.roots.preprocessed == Path("w/preprocessed")
    assert plain.roots.raw == Path("/data/raw")
    assert plain.predictions_dir == Path("w/predictions/Dataset004_H")
    assert plain.test_summary == Path("w/predictions/Dataset004_H/test_summary.json")
    assert plain.logs == plain.dataset_logs == Path("w/logs/Dataset004_H")

    run = run_instances(paper_config())[3]
    tree = run.tree
    assert tree.roots.results == Path("w/results/seed_1")
    assert tree.results_dir == Path("w/results/seed_1/Dataset902_Hippo-2D")
    assert tree.roots.preprocessed == Path("w/preprocessed")  # shared by the seeds
    assert tree.roots.raw == Path("/data/raw")
    assert tree.predictions_dir == Path("w/predictions/seed_1/Dataset902_Hippo-2D")
    assert tree.logs == Path("w/logs/seed_1/Dataset902_Hippo-2D")
    assert tree.dataset_logs == Path("w/logs/Dataset902_Hippo-2D")


def test_the_paper_table_gets_every_run_and_test_summaries_only_where_labelled(
    tmp_path: Path,
) -> None:
    config = paper_config()
    config["work_dir"] = str(tmp_path / "my work")
    labelled = tmp_path / "raw" / "Dataset902_Hippo-2D"
    (labelled / "imagesTs").mkdir(parents=True)
    (labelled / "imagesTs" / "case_0000.nii.gz").write_bytes(b"")
    config["datasets"][1]["raw_root"] = str(tmp_path / "raw")
    runs = run_instances(config)
    for run in runs:
        run.config["dataset"].setdefault("synthetic", {"enabled": False})
    # real data: imagesTs without labelsTs has no test summary; synthetic data has one
    assert [len(r.test_summary()) for r in runs] == [1, 1, 0, 0]
    (labelled / "labelsTs").mkdir()
    assert [len(r.test_summary()) for r in runs] == [1, 1, 1, 1]
    words = shlex.split(paper_table_flags(runs))
    assert words[:4] == [
        "--run", f"{tmp_path}/my work/results/seed_0/Dataset901_Liver", "0",
        f"{tmp_path}/my work/predictions/seed_0/Dataset901_Liver/test_summary.json",
    ]  # fmt: skip
    assert words.count("--run") == 4
    assert words[-3:-1] == [f"{tmp_path}/my work/results/seed_1/Dataset902_Hippo-2D", "1"]


def test_the_documented_example_is_a_valid_config_of_nine_runs() -> None:
    text = (REPO / "docs" / "paper-mode.md").read_text()
    section = text[text.index("## Several datasets and seeds in one run") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    block = section[start : section.index("```", start)]
    config = yaml.safe_load(block)
    assert schema_errors(config, SCHEMA) == []
    check_run_keys(config)
    runs = run_instances(config)
    assert len(runs) == 9 and runs[5].name == "Dataset005_Prostate_seed2"
    assert runs[5].config["planning"]["configurations"] == ["2d"]
    assert runs[8].config["planning"] == {
        "configurations": ["2d", "3d_fullres"], "planner": "ResEncM"
    }  # fmt: skip


def test_synthetic_data_lives_in_the_work_dir_and_real_data_needs_its_raw_root() -> None:
    """The demo's data is synthesized into work_dir/raw; a real dataset's raw root is never
    guessed (issue 36: an unset $nnUNet_raw fell back to work/raw)."""
    synthetic = {"id": 900, "name": "Synth", "raw_root": None, "synthetic": {"enabled": True}}
    assert raw_root_of(synthetic, "w") == Path("w/raw")
    assert raw_root_of({"id": 4, "name": "H", "raw_root": "/r"}, "w") == Path("/r")
    with pytest.raises(ConfigurationError, match=r"^config dataset\.raw_root: null is empty"):
        RunTree.of_config({"work_dir": "w", "dataset": {"id": 4, "name": "H"}, "seed": 0})


def test_an_empty_or_missing_test_image_folder_is_no_test_set_and_said(tmp_path: Path) -> None:
    config = {"dataset": {"id": 4, "name": "H", "raw_root": str(tmp_path)}}
    raw = tmp_path / "Dataset004_H"
    raw.mkdir()
    skipped = "no test images: test prediction and evaluation skipped"
    assert has_test_images_and_labels(config, raw) == (False, False)
    assert incomplete_test_set_notice(config, raw) == f"{skipped} (no folder {raw / 'imagesTs'})"
    (raw / "imagesTs").mkdir()
    (raw / "imagesTs" / ".DS_Store").write_bytes(b"")
    assert has_test_images_and_labels(config, raw) == (False, False)
    assert incomplete_test_set_notice(config, raw) == f"{skipped} ({raw / 'imagesTs'} is empty)"
    (raw / "imagesTs" / "case_0000.nii.gz").write_bytes(b"")
    assert has_test_images_and_labels(config, raw) == (True, False)
    assert incomplete_test_set_notice(config, raw) == (
        f"test images without labels (no folder {raw / 'labelsTs'}): test evaluation skipped"
    )
    (raw / "labelsTs").mkdir()
    assert has_test_images_and_labels(config, raw) == (True, True)
    assert incomplete_test_set_notice(config, raw) is None
    synthetic = {"dataset": {"synthetic": {"enabled": True, "num_test": 0}}}
    notice = incomplete_test_set_notice(synthetic, raw)
    assert notice == f"{skipped} (dataset.synthetic.num_test is 0)"
