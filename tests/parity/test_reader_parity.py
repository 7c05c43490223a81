"""Image readers vs upstream nnU-Net 2.8.1: fingerprint, plans, preprocessed arrays, write-back.

tests/data/readers/<scenario>/ holds a tiny raw dataset in one reader's format and what upstream
made of it (tests/data/readers/README.md has the commands): ``dataset_fingerprint.json``,
``nnUNetPlans.json``, the preprocessed arrays (``.npz``) and properties (JSON of upstream's
pickles), and ``written/``: one label written back by upstream's own reader from its
``read_seg`` array and ``read_images`` properties. The nibabel datasets have oblique, flipped,
anisotropic affines (the Reorient one also permuted axes), so a wrong transpose, zoom order or
reorientation changes spacings, shapes and arrays. Tolerances are the fingerprint test's (one
float32 ulp for mean/std, see test_fingerprint.py); everything else must be identical.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import nibabel
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile
from skimage import io as skio

from nnunet_core.dataset.verify import verify_dataset
from nnunet_core.errors import DatasetError
from nnunet_core.io.blosc2_store import open_case
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.images import read_seg, write_seg
from nnunet_core.io.plans import Plans
from nnunet_core.io.readers import KNOWN_NAMES, reader_for_dataset, reader_name
from nnunet_core.planning import fingerprint as fp
from nnunet_core.planning.planner import plan_experiment, reader_writer_name
from nnunet_core.preprocessing.preprocessor import preprocess_dataset
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "readers"
SCENARIOS = sorted(p.name for p in DATA.iterdir() if (p / "nnUNetPlans.json").is_file())
READER_OF = {
    "nibabel": "NibabelIO",
    "nibabel_reorient": "NibabelIOWithReorient",
    "natural2d": "NaturalImage2DIO",
    "tiff3d": "Tiff3DIO",
    "sitk_reorient": "SimpleITKIOWithReorient",
}
ULP_TOLERANT: set[str] = set()  # mean and std too: upstream's float32 arithmetic, to the last bit
GEOMETRY_KEYS = ("nibabel_stuff", "sitk_stuff")


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def test_every_reader_has_a_scenario() -> None:
    assert {"nibabel", "nibabel_reorient", "natural2d"} <= set(SCENARIOS)
    assert set(SCENARIOS) <= set(READER_OF)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_fingerprint_matches_upstream(scenario: str) -> None:
    mine = json.loads(json.dumps(fp.extract_fingerprint(DATA / scenario / "raw", 1)))
    ref = _read(DATA / scenario / "dataset_fingerprint.json")
    assert list(mine) == list(ref)
    for key in ("spacings", "shapes_after_crop", "median_relative_size_after_cropping"):
        assert json.dumps(mine[key]) == json.dumps(ref[key]), key  # values and number types
    stats = mine["foreground_intensity_properties_per_channel"]
    for channel, expected in ref["foreground_intensity_properties_per_channel"].items():
        assert list(stats[channel]) == list(expected)
        for key, value in expected.items():
            if key in ULP_TOLERANT:
                assert stats[channel][key] == pytest.approx(value, rel=3e-7), (channel, key)
            else:
                assert stats[channel][key] == value, (channel, key)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_plans_match_upstream(scenario: str) -> None:
    folder = DATA / scenario
    ref = _read(folder / "nnUNetPlans.json")
    plans = plan_experiment(
        _read(folder / "dataset_fingerprint.json"),
        _read(folder / "raw" / "dataset.json"),
        ref["dataset_name"],
    )
    assert plans["image_reader_writer"] == READER_OF[scenario]
    # the whole dict as written to disk: values, key order and number types
    assert json.dumps(plans, indent=1) == json.dumps(ref, indent=1)


@pytest.fixture(scope="module")
def preprocessed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for scenario in SCENARIOS:
        folder = DATA / scenario
        plans = _read(folder / "nnUNetPlans.json")
        target = tmp_path_factory.mktemp("pre") / scenario
        configurations = [c for c in ("2d", "3d_fullres") if c in plans["configurations"]]
        preprocess_dataset(
            folder / "raw",
            target,
            Plans(plans),
            configurations,
            load_dataset_json(folder / "raw" / "dataset.json"),
            num_processes=1,
            disable_progress=True,
        )
        out[scenario] = target
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_preprocessed_arrays_match_upstream(scenario: str, preprocessed: dict[str, Path]) -> None:
    expected_root = DATA / scenario / "preprocessed"
    identifiers = sorted(p.name for p in expected_root.iterdir())
    assert identifiers
    for identifier in identifiers:
        for npz in sorted((expected_root / identifier).glob("*.npz")):
            case, where = npz.stem, f"{scenario}/{identifier}/{npz.stem}"
            data, seg, props = open_case(preprocessed[scenario] / identifier, case)
            with np.load(npz) as expected:
                assert data.shape == expected["data"].shape, where
                assert np.array_equal(data[:], expected["data"]), where  # bit-identical
                assert np.array_equal(seg[:], expected["seg"]), where
            exp_props = _read(npz.with_name(f"{case}_properties.json"))
            for key in (
                "spacing",
                "shape_before_cropping",
                "bbox_used_for_cropping",
                "shape_after_cropping_and_before_resampling",
                *(k for k in GEOMETRY_KEYS if k in exp_props),
            ):
                assert props[key] == exp_props[key], (where, key)
            assert set(props) & set(GEOMETRY_KEYS) == set(exp_props) & set(GEOMETRY_KEYS)
            locations = {k: v for k, v in props["class_locations"].items()}
            assert locations == exp_props["class_locations"], where


def _first_case(scenario: str) -> tuple[Path, list[Path], Path]:
    raw = DATA / scenario / "raw"
    dataset_json = _read(raw / "dataset.json")
    ending = dataset_json["file_ending"]
    written = next(p for p in (DATA / scenario / "written").iterdir() if p.name.endswith(ending))
    case = written.name[: -len(ending)]
    images = sorted((raw / "imagesTr").glob(f"{case}_*{ending}"))
    return raw / "labelsTr" / written.name, images, written


def _assert_same_file(mine: Path, upstream: Path, scenario: str) -> None:
    name = upstream.name
    if name.endswith((".nii.gz", ".nii")):
        a, b = nibabel.load(str(mine)), nibabel.load(str(upstream))
        assert np.array_equal(np.asarray(a.dataobj), np.asarray(b.dataobj))
        assert a.get_data_dtype() == b.get_data_dtype()
        assert np.array_equal(a.affine, b.affine)
        for key in ("qform_code", "sform_code", "pixdim", "srow_x", "quatern_b", "dim"):
            assert np.array_equal(a.header[key], b.header[key]), key
        ia, ib = sitk.ReadImage(str(mine)), sitk.ReadImage(str(upstream))
        assert ia.GetSpacing() == ib.GetSpacing() and ia.GetOrigin() == ib.GetOrigin()
        assert ia.GetDirection() == ib.GetDirection()
        if scenario.startswith("nibabel"):  # nibabel writes deterministic bytes
            assert gzip.decompress(mine.read_bytes()) == gzip.decompress(upstream.read_bytes())
    elif name.endswith(".png"):
        a, b = skio.imread(str(mine)), skio.imread(str(upstream))
        assert a.dtype == b.dtype and np.array_equal(a, b)
    else:
        a, b = tifffile.imread(str(mine)), tifffile.imread(str(upstream))
        assert a.dtype == b.dtype and np.array_equal(a, b)
        side = name[: -len(upstream.suffix)] + ".json"
        assert _read(mine.with_name(side)) == _read(upstream.with_name(side))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_written_segmentation_matches_upstreams_writer(scenario: str, tmp_path: Path) -> None:
    label, images, upstream = _first_case(scenario)
    raw = DATA / scenario / "raw"
    reader = reader_for_dataset(_read(raw / "dataset.json"), example_file=images[0])
    assert reader.name == READER_OF[scenario]
    seg, _ = reader.read_seg(label)
    _, properties = reader.read_images(images)
    exp_props = _read(upstream.with_name(upstream.name.split(".")[0] + "_properties.json"))
    assert json.loads(json.dumps(properties)) == exp_props
    target = tmp_path / upstream.name
    reader.write_seg(seg[0], target, json.loads(json.dumps(properties)))  # properties via JSON
    _assert_same_file(target, upstream, scenario)
    # without naming the reader, the properties pick the same writer
    again = tmp_path / "again" / upstream.name
    again.parent.mkdir()
    write_seg(seg[0], again, properties)
    _assert_same_file(again, upstream, scenario)
    # and the written file reads back as the input label
    back, _ = reader.read_seg(target)
    assert np.array_equal(np.asarray(back, dtype=np.float32), np.asarray(seg, dtype=np.float32))


def test_reorient_readers_turn_arrays_to_ras() -> None:
    """The Reorient readers' arrays differ from the plain ones by a flip/permutation to RAS."""
    from nnunet_core.io.readers import reader_by_name

    path = next((DATA / "nibabel_reorient" / "raw" / "labelsTr").iterdir())
    plain, plain_props = reader_by_name("NibabelIO").read_seg(path)
    turned, props = reader_by_name("NibabelIOWithReorient").read_seg(path)
    assert plain.shape != turned.shape  # permuted axes
    assert sorted(plain.shape) == sorted(turned.shape)
    assert plain_props["spacing"] != props["spacing"]
    # the reoriented zooms come from the float64 affine, the plain ones from the float32 header
    assert sorted(plain_props["spacing"]) == pytest.approx(sorted(props["spacing"]), rel=1e-6)
    affine = np.asarray(props["nibabel_stuff"]["reoriented_affine"])
    assert nibabel.aff2axcodes(affine) == ("R", "A", "S")
    assert nibabel.aff2axcodes(np.asarray(plain_props["nibabel_stuff"]["original_affine"])) != (
        "R",
        "A",
        "S",
    )


def test_unknown_reader_name_is_one_line_error(tmp_path: Path) -> None:
    raw = tmp_path / "Dataset961_ReadNib"
    shutil.copytree(DATA / "nibabel" / "raw", raw)
    content = _read(raw / "dataset.json")
    content["overwrite_image_reader_writer"] = "NibabelIo"
    (raw / "dataset.json").write_text(json.dumps(content))
    for call in (
        lambda: verify_dataset(raw, raw.name, disable_progress=True),
        lambda: fp.extract_fingerprint(raw, 1),
        lambda: reader_writer_name(content),
    ):
        with pytest.raises(DatasetError) as info:
            call()
        message = str(info.value)
        assert "\n" not in message and "dataset.json" in message and "'NibabelIo'" in message
        assert all(name in message for name in KNOWN_NAMES)
    assert str(raw / "dataset.json") in str(
        pytest.raises(DatasetError, fp.extract_fingerprint, raw, 1).value
    )


@pytest.mark.parametrize(
    ("ending", "expected"),
    [
        (".nii.gz", "SimpleITKIO"),
        (".NII.GZ", "SimpleITKIO"),
        (".nii", "NibabelIO"),
        (".mha", "SimpleITKIO"),
        (".nrrd", "SimpleITKIO"),
        (".png", "NaturalImage2DIO"),
        (".bmp", "NaturalImage2DIO"),
        (".tif", "NaturalImage2DIO"),
        (".tiff", "Tiff3DIO"),
        (".nhdr", "SimpleITKIO"),  # no upstream reader claims it; ITK reads it
    ],
)
def test_reader_from_file_ending_without_the_key(ending: str, expected: str) -> None:
    content = {"file_ending": ending}
    assert reader_name(content) == expected
    assert reader_name({**content, "overwrite_image_reader_writer": "None"}) == expected
    assert reader_writer_name(content) == expected
    assert (
        reader_writer_name({**content, "overwrite_image_reader_writer": "Tiff3DIO"}) == "Tiff3DIO"
    )


def test_a_3d_tif_example_file_picks_tiff3dio(tmp_path: Path) -> None:
    """Upstream skips readers that cannot read the example: a 3-D .tif is not a natural image."""
    path = tmp_path / "case_0000.tif"
    tifffile.imwrite(path, np.zeros((5, 6, 7), np.float32))
    assert reader_name({"file_ending": ".tif"}, example_file=path) == "Tiff3DIO"
    flat = tmp_path / "flat_0000.tif"
    tifffile.imwrite(flat, np.zeros((6, 7), np.uint8))
    assert reader_name({"file_ending": ".tif"}, example_file=flat) == "NaturalImage2DIO"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_verify_reads_with_the_datasets_reader(scenario: str, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(DATA / scenario / "raw", raw)
    result = verify_dataset(raw, "D", disable_progress=True)
    assert result.problems == []
    assert result.report["image_reader_writer"] == READER_OF[scenario]
    if scenario.startswith("nibabel"):
        # a label whose affine differs from its image's is caught with the nibabel readers too
        label = next((raw / "labelsTr").iterdir())
        image = nibabel.load(str(label))
        affine = image.affine.copy()
        affine[0, 3] += 3.0
        nibabel.save(nibabel.Nifti1Image(np.asarray(image.dataobj), affine), str(label))
        problems = verify_dataset(raw, "D", disable_progress=True).problems
        assert len(problems) == 1 and "affine" in problems[0] and label.name in problems[0]


def test_evaluation_style_reading_keeps_labels(tmp_path: Path) -> None:
    """read_seg without a reader picks upstream's reader for the ending (NibabelIO for .nii)."""
    label = next((DATA / "nibabel" / "raw" / "labelsTr").iterdir())
    image = nibabel.load(str(label))
    target = tmp_path / "x.nii"
    nibabel.save(image, str(target))
    seg, props = read_seg(target)
    assert "nibabel_stuff" in props
    assert np.array_equal(seg[0], np.asarray(image.dataobj).transpose(2, 1, 0))


@pytest.mark.parametrize("scenario", ["nibabel_reorient", "sitk_reorient", "natural2d", "tiff3d"])
def test_export_writes_with_the_plans_reader(scenario: str, tmp_path: Path) -> None:
    """A perfect prediction of a preprocessed case, exported, is the raw label in its own file
    geometry (voxel order, affine/direction, spacing file) whatever the reader."""
    from nnunet_core.dataset.discovery import training_cases
    from nnunet_core.inference.export import export_prediction
    from nnunet_core.preprocessing.preprocessor import run_case

    folder = DATA / scenario
    plans = _read(folder / "nnUNetPlans.json")
    dataset_json = load_dataset_json(folder / "raw" / "dataset.json")
    config = "3d_fullres" if "3d_fullres" in plans["configurations"] else "2d"
    configuration = Plans(plans).configuration(config).raw
    configuration["spacing"] = [0, 0, 0]  # set below: the case's own, so nothing is resampled
    case = training_cases(folder / "raw", dataset_json)[0]
    ending = dataset_json.file_ending
    _, _, props = run_case(case, Plans(plans), config, dataset_json)
    axes = plans["transpose_forward"]
    spacing = [props["spacing"][a] for a in axes]
    configuration["spacing"] = spacing if config == "3d_fullres" else spacing[1:]
    plans_here = Plans(
        {**plans, "configurations": {**plans["configurations"], config: configuration}}
    )
    _, seg, props = run_case(case, plans_here, config, dataset_json)
    labels = np.clip(seg[0], 0, None).astype(np.int64)
    num = len(dataset_json.label_spec.foreground_labels) + 1
    logits = (np.eye(num, dtype=np.float32)[labels] * 8.0 - 4.0).transpose(3, 0, 1, 2)
    written = export_prediction(
        logits,
        props,
        plans_here,
        plans_here.configuration(config),
        dataset_json.label_spec,
        tmp_path / case.identifier,
        ending,
    )
    assert written == tmp_path / f"{case.identifier}{ending}"
    label = case.label
    if scenario.startswith("nibabel"):
        a, b = nibabel.load(str(written)), nibabel.load(str(label))
        assert np.array_equal(a.affine, b.affine) and a.shape == b.shape
        assert np.array_equal(np.asarray(a.dataobj), np.asarray(b.dataobj))
    elif scenario == "sitk_reorient":
        a, b = sitk.ReadImage(str(written)), sitk.ReadImage(str(label))
        assert a.GetSize() == b.GetSize() and a.GetDirection() == b.GetDirection()
        assert np.allclose(a.GetOrigin(), b.GetOrigin()) and a.GetSpacing() == b.GetSpacing()
        assert np.array_equal(sitk.GetArrayFromImage(a), sitk.GetArrayFromImage(b))
    elif scenario == "natural2d":
        assert np.array_equal(skio.imread(str(written)), skio.imread(str(label)))
    else:
        assert np.array_equal(tifffile.imread(str(written)), tifffile.imread(str(label)))
        assert _read(written.with_suffix(".json")) == _read(label.with_suffix(".json"))
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_verify_catches_nan_and_truncation_with_nibabel(tmp_path: Path) -> None:
    """The NIfTI byte checks run whatever the reader (here NibabelIO)."""
    raw = tmp_path / "raw"
    shutil.copytree(DATA / "nibabel" / "raw", raw)
    images = sorted((raw / "imagesTr").iterdir())
    image = nibabel.load(str(images[0]))
    array = np.asarray(image.dataobj).copy()
    array[5, 5, 5] = np.nan
    nibabel.save(nibabel.Nifti1Image(array, image.affine), str(images[0]))
    data = images[1].read_bytes()
    images[1].write_bytes(data[: len(data) // 2])
    problems = verify_dataset(raw, "D", disable_progress=True).problems
    assert len(problems) == 2, problems
    assert "1 NaN/inf voxel" in problems[0] and images[0].name in problems[0]
    assert "unreadable or corrupt" in problems[1] and images[1].name in problems[1]


def test_3d_tif_without_the_key_verifies_with_a_warning(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(DATA / "tiff3d" / "raw", raw)
    for path in [*raw.glob("*/*.tiff")]:
        path.rename(path.with_suffix(".tif"))
    content = _read(raw / "dataset.json")
    (raw / "dataset.json").write_text(json.dumps({**content, "file_ending": ".tif"}))
    result = verify_dataset(raw, "D", disable_progress=True)
    assert result.problems == [] and result.report["image_reader_writer"] == "Tiff3DIO"
    assert any('"overwrite_image_reader_writer": "Tiff3DIO"' in w for w in result.warnings)


def test_unknown_reader_in_plans_is_one_line_error() -> None:
    from nnunet_core.errors import ConfigurationError
    from nnunet_core.io.readers import reader_for_plans

    with pytest.raises(ConfigurationError, match=r"^plans x: unknown image reader/writer 'Foo'"):
        reader_for_plans(Plans({"configurations": {}, "image_reader_writer": "Foo"}), "plans x")
    assert reader_for_plans(Plans({"configurations": {}})).name == "SimpleITKIO"
