"""Selected fake results per seed, with surface metrics, for the paper table tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nnunet_core.evaluation.crossval import accumulate_crossval
from nnunet_core.evaluation.ensemble import ensemble_crossval
from nnunet_core.evaluation.metrics import compute_metrics_on_folder
from nnunet_core.evaluation.selection import find_best_configuration
from nnunet_core.evaluation.surface import SurfaceSettings
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.layout.results import TrainedModel
from nnunet_core.report.paper_data import Run
from tests.helpers.fake_results import make_tree, one_hot

CONFIGS = ("3d_fullres", "2d")


def misses(count: int):
    """``index + count`` label-1 voxels missed (a worse model for larger ``count``)."""

    def predict(index: int, gt: np.ndarray) -> np.ndarray:
        seg = gt.copy()
        for z, y, x in np.argwhere(gt == 1)[: index + count]:
            seg[z, y, x] = 0
        return one_hot(seg, confidence=0.6)

    return predict


def exact_but_stray(_index: int, gt: np.ndarray) -> np.ndarray:
    seg = gt.copy()
    seg[5, 0, 0] = 1
    return one_hot(seg)


def seed_tree(root: Path, seed: int) -> Run:
    """One seed's results: 3d_fullres nearly exact, 2d missing voxels (more in seed 1)."""
    dirs = make_tree(root, {"3d_fullres": exact_but_stray, "2d": misses(2 + 3 * seed)})
    surface = SurfaceSettings()
    models = [TrainedModel(c) for c in CONFIGS]
    for model in models:
        accumulate_crossval(dirs, model, surface=surface)
    ensemble_crossval(dirs, models, surface=surface)
    info = find_best_configuration(dirs, models)
    spec = load_dataset_json(dirs.preprocessed / "dataset.json").label_spec
    test_summary = root / "test_summary.json"
    winner = Path(info["candidates"][0]["source"]) / "postprocessed"
    compute_metrics_on_folder(
        dirs.gt_dir, winner, ".nii.gz", spec, output_file=test_summary, surface=surface
    )
    return Run(dirs.name, seed, dirs.results, test_summary)


def assert_latex_compiles(table_tex: str, folder: Path) -> None:
    """A booktabs table in a minimal document compiles with pdflatex (a skip where there is
    none: the table was then checked as text only)."""
    import shutil
    import subprocess

    import pytest

    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        pytest.skip("no pdflatex on this machine: the LaTeX table was checked as text only")
    document = "\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n"
    (folder / "doc.tex").write_text(document + table_tex + "\\end{document}\n")
    result = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=folder, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:]
