"""How many CPUs a fold job asks SLURM for per GPU: its augmentation workers plus one."""

from __future__ import annotations

from nnunet_core.runtime.cpus import MAX_DEFAULT_WORKERS
from nnunet_core.workflow.flags import fold_cpus_per_gpu, fold_data_workers


def test_the_config_wins_then_the_environment_then_the_trainers_default() -> None:
    env = {"nnUNet_n_proc_DA": "6"}
    assert fold_cpus_per_gpu({"num_workers": 3}, env) == 4
    assert fold_cpus_per_gpu({"num_workers": 0}, env) == 1  # the thread runs in the trainer
    assert fold_cpus_per_gpu({"num_workers": None}, env) == 7
    assert fold_cpus_per_gpu({"num_workers": None}, {}) == MAX_DEFAULT_WORKERS + 1
    assert fold_data_workers({}, {"nnUNet_n_proc_DA": " "}) == MAX_DEFAULT_WORKERS
