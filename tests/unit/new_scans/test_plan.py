"""The prediction mode's planning, without torch: what ``predict.model`` resolves to, which cases
a run still has to predict, when the key changes, and whose carried code may run.

Model folders here hold real plans and dataset.json files and placeholder checkpoints: planning
reads no checkpoint (a job loads it), only its size and time for the key."""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import threading
import zipfile
from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.new_scans.model_consent import CONSENT, OWN_MODEL, code_consent
from nnunet_core.new_scans.model_source import resolve_model
from nnunet_core.new_scans.plan import is_done, plan_run, shard_cases
from tests.helpers.paths import TEST_DATA

DATASET = "Dataset900_Synth"
PLANS = TEST_DATA / "plans" / "synth3d_peer900" / "nnUNetPlans.json"
DATASET_JSON = TEST_DATA / "upstream_model" / "dataset.json"


def model_folder(results: Path, configuration: str = "3d_fullres", folds=(0, 1)) -> Path:
    folder = results / DATASET / f"nnUNetTrainer__nnUNetPlans__{configuration}"
    folder.mkdir(parents=True)
    shutil.copy(PLANS, folder / "plans.json")
    shutil.copy(DATASET_JSON, folder / "dataset.json")
    for fold in folds:
        (folder / f"fold_{fold}").mkdir()
        (folder / f"fold_{fold}" / "checkpoint_final.pth").write_bytes(b"weights %d" % fold)
    return folder


def scans(folder: Path, cases: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for case in cases:
        (folder / f"{case}_0000.nii.gz").write_bytes(b"image")
    return folder


def test_a_model_folder_predicts_with_its_folds_and_their_postprocessing(tmp_path) -> None:
    folder = model_folder(tmp_path / "results")
    (folder / "fold_2").mkdir()  # a fold without its final checkpoint is not trained
    crossval = folder / "crossval_results_folds_0_1"
    crossval.mkdir()
    (crossval / "postprocessing.json").write_text("{}")
    model = resolve_model(str(folder), tmp_path / "work")
    assert [(m.model_dir, m.folds) for m in model.members] == [(folder, (0, 1))]
    assert model.postprocessing == crossval / "postprocessing.json"
    assert resolve_model(str(folder), tmp_path, folds=[1]).postprocessing is None
    with pytest.raises(ConfigurationError, match=r"no checkpoint_final.pth for fold\(s\) \[2\]"):
        resolve_model(str(folder), tmp_path, folds=["2"])


def test_a_results_folder_predicts_as_its_selection_chose_even_when_moved(tmp_path) -> None:
    results = tmp_path / "moved" / "results"
    first, second = model_folder(results, "2d"), model_folder(results, "3d_fullres")
    ensemble = results / DATASET / "ensembles" / "ensemble___a___b"
    ensemble.mkdir(parents=True)
    (ensemble / "postprocessing.json").write_text("{}")
    chosen = [{"configuration": c, "trainer": "nnUNetTrainer", "plans_identifier": "nnUNetPlans"}
              for c in ("2d", "3d_fullres")]  # fmt: skip
    where = "/where/it/was/trained/ensembles/ensemble___a___b/postprocessing.pkl"
    selection = {"folds": [0, 1], "best_model_or_ensemble": {
        "selected_model_or_models": chosen, "postprocessing_file": where}}  # fmt: skip
    (results / DATASET / "inference_information.json").write_text(json.dumps(selection))
    model = resolve_model(str(results), tmp_path / "work")  # a root holding one dataset
    assert [m.model_dir for m in model.members] == [first, second]
    assert model.postprocessing == ensemble / "postprocessing.json"  # the pickle's JSON twin


def test_several_models_without_a_selection_are_named(tmp_path) -> None:
    model_folder(tmp_path / "results", "2d")
    model_folder(tmp_path / "results", "3d_fullres")
    with pytest.raises(ConfigurationError, match="several models .*__2d, .*__3d_fullres"):
        resolve_model(str(tmp_path / "results" / DATASET), tmp_path / "work")
    with pytest.raises(ConfigurationError, match=r"predict.model: .*nothing not found"):
        resolve_model(str(tmp_path / "nothing"), tmp_path / "work")


def zipped_model(tmp_path: Path) -> bytes:
    folder = model_folder(tmp_path / "to_zip")
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                handle.write(path, path.relative_to(tmp_path / "to_zip"))
    return archive.read_bytes()


def test_a_url_is_downloaded_once_and_installed_aside(tmp_path) -> None:
    body, requests = zipped_model(tmp_path), []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            requests.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/model.zip"
        work = tmp_path / "work"
        model = resolve_model(url, work)
        again = resolve_model(url, work)
    finally:
        server.shutdown()
    assert requests == ["/model.zip"]
    installed = work / "new_scans" / "models" / hashlib.sha256(body).hexdigest()[:16]
    assert (
        model.members[0].model_dir == installed / DATASET / "nnUNetTrainer__nnUNetPlans__3d_fullres"
    )
    assert model.identity == again.identity and model.identity[:2] == (
        "zip",
        hashlib.sha256(body).hexdigest(),
    )


def test_only_missing_cases_are_planned_and_the_key_follows_the_settings(tmp_path) -> None:
    folder = model_folder(tmp_path / "results")
    images = scans(tmp_path / "in", ["a", "b", "c", "d", "e"])
    output, work = tmp_path / "out", tmp_path / "work"
    predict = {
        "model": str(folder),
        "input": str(images),
        "output": str(output),
        "cases_per_job": 2,
    }
    run = plan_run(predict, work)
    assert [shard_cases(run.folder, s) for s in run.shards] == [["a", "b"], ["c", "d"], ["e"]]
    records = output / ".nnunet-core" / "cases"
    records.mkdir(parents=True)
    for case in "abcde":
        (output / f"{case}.nii.gz").write_bytes(b"seg")
        (records / f"{case}.json").write_text(json.dumps({"key": run.key}))
    (records / "c.json").write_text(json.dumps({"key": "an older model"}))
    (output / "e.nii.gz").unlink()
    again = plan_run(predict, work)
    assert again.key == run.key and [shard_cases(again.folder, s) for s in again.shards] == [
        ["c", "e"]
    ]
    assert is_done(output, "a", run.key, ".nii.gz") and not is_done(output, "c", run.key, ".nii.gz")
    assert plan_run({**predict, "device": "cpu"}, work).key == run.key  # the device is no key
    changed = plan_run({**predict, "step_size": 0.25}, work)
    assert changed.key != run.key and len(changed.shards) == 3  # every case again
    assert plan_run({**predict, "low_memory": True}, work).key not in (run.key, changed.key)
    (folder / "fold_1" / "checkpoint_final.pth").write_bytes(b"retrained weights")
    assert plan_run(predict, work).key != run.key


def test_carried_code_runs_with_consent_or_when_the_model_is_the_users_own(tmp_path) -> None:
    folder = model_folder(tmp_path / "results")
    source = folder / "trainer_source" / "my_trainer.py"
    source.parent.mkdir()
    source.write_text("class MyTrainer: ...\n")
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    original = tmp_path / "mine" / "my_trainer.py"
    record = {"trainer": "MyTrainer", "class": "MyTrainer", "sha256": sha,
              "source": "trainer_source/my_trainer.py", "original_file": str(original)}  # fmt: skip
    (folder / "trainer.json").write_text(json.dumps(record))
    model = resolve_model(str(folder), tmp_path / "work")
    with pytest.raises(ConfigurationError) as refused:
        code_consent(model, tmp_path / "work", consent=False)
    assert f"{source} (sha256 {sha})" in str(refused.value) and CONSENT in str(refused.value)
    assert code_consent(model, tmp_path / "work", consent=True) == CONSENT
    original.parent.mkdir()
    shutil.copy(source, original)  # the user's own file, unchanged since training
    assert code_consent(model, tmp_path / "work", consent=False) == OWN_MODEL
    original.write_text("class MyTrainer: changed = True\n")
    with pytest.raises(ConfigurationError):
        code_consent(model, tmp_path / "work", consent=False)


def test_a_shard_that_no_retry_can_fix_ends_its_retries_at_once(tmp_path, capsys) -> None:
    """A broken checkpoint fails the shard job with its one line and a marker; the retry a
    cluster profile would submit ends at once with the same status; a new run tries again."""
    from nnunet_core.new_scans import shard as shard_job

    folder = model_folder(tmp_path / "results", folds=(0,))  # placeholder bytes: no checkpoint
    images = tmp_path / "in"
    shutil.copytree(TEST_DATA / "upstream_model" / "imagesTs", images)
    predict = {"model": str(folder), "input": str(images), "output": str(tmp_path / "out")}
    run = plan_run(predict, tmp_path / "work")
    (shard,) = run.shards
    first = shard_job.main([str(run.folder), shard])
    assert first == 2, capsys.readouterr()
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "checkpoint_final.pth" in line
    again = shard_job.main([str(run.folder), shard])
    assert again == first
    assert capsys.readouterr().err.strip() == f"{line} (an earlier attempt; not tried again)"
    plan_run(predict, tmp_path / "work")  # the next run of the workflow
    assert not list((run.folder / "shards").glob("*.no_retry.json"))
