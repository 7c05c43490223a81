"""How a shard job's predictor is set up: what runs beside the network, and how many tiles per
forward pass (``predict.low_memory``)."""

from __future__ import annotations

import torch

from nnunet_core.new_scans import shard
from nnunet_core.new_scans.plan import settings_of


def test_on_the_cpu_the_export_runs_in_the_jobs_process_and_low_memory_passes_one_tile() -> None:
    settings = settings_of({"device": "cpu"})
    default = shard.prediction_settings(settings, members=1)
    assert default.num_processes_export == 0 and default.batch_tiles is None  # the plan's batch
    assert (
        not default.save_probabilities and shard.prediction_settings(settings, 2).save_probabilities
    )
    low = shard.prediction_settings({**settings, "low_memory": True}, members=1)
    assert low.batch_tiles == 1 and low.num_processes_export == 0


def test_on_a_gpu_the_export_overlaps_the_network_unless_memory_is_low(monkeypatch) -> None:
    # this machine has no CUDA: the device is stood in for, nothing runs on it
    monkeypatch.setattr(
        "nnunet_core.runtime.devices.resolve_device", lambda _: torch.device("cuda")
    )
    monkeypatch.setattr(shard.os, "cpu_count", lambda: 16)
    settings = settings_of({"device": "cuda"})
    assert shard.prediction_settings(settings, members=1).num_processes_export == 2
    low = shard.prediction_settings({**settings, "low_memory": True}, members=1)
    assert low.num_processes_export == 0 and low.batch_tiles == 1
