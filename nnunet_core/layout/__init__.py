"""Every file and folder name of the trees nnunet_core reads and writes, and nothing else.

One module per tree, so a newcomer finds a name by the tree it lives in:

    roots         the three roots (nnUNet_raw, ...), dataset folder names (Dataset900_Synth)
    raw           imagesTr, labelsTr, imagesTs, labelsTs, dataset.json, <case>_0000<ending>
    preprocessed  fingerprint, plans, splits, verify.json, gt_segmentations, case store files
    results       Trainer__Plans__Config, fold_k, checkpoints, validation, cross-validation,
                  ensembles, selection files, the report folder
    predictions   the workflow's test-set predictions tree
    work          the workflow's work_dir: roots, logs, lock, pretrained, paper, seed folders

No other module spells one of these names (tests/unit/layout/test_names_live_in_layout.py).
"""

from nnunet_core.layout.results import DatasetDirs, TrainedModel
from nnunet_core.layout.roots import Roots, resolve_dataset_name

__all__ = ["DatasetDirs", "Roots", "TrainedModel", "resolve_dataset_name"]
