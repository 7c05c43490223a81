"""The context of segmenting new scans (config ``predict:``, workflow/rules/segment.smk).

The values its two rules read, built once: the work_dir, the logs folder that ``nnunet-core
status`` lists, the GPU of each shard job and its threads, the slot flags of a local GPU shard,
and the console messages. The scans themselves (the model, the shards) are planned by
``nnunet_core.new_scans.plan`` in segment.smk, a package above this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnunet_core.layout.new_scans import NEW_SCANS_FOLDER
from nnunet_core.layout.work import logs_dir
from nnunet_core.workflow import devices, flags
from nnunet_core.workflow import threads as job_threads
from nnunet_core.workflow.run_context import JobMessages


@dataclass(frozen=True)
class SegmentContext:
    """What segment.smk's rules read (``of_workflow``)."""

    work_dir: Path
    # `nnunet-core status` lists the shards under "new_scans" (case i/N and ETA from their logs)
    logs: Path
    # one GPU per shard wherever GPUs exist (the cluster's nodes, or this machine's), none on CPU
    shard_gpus: int
    shard_threads: int
    # a local GPU shard takes a whole GPU through the fold jobs' slot locks (Snakemake counts)
    slot_flags: str
    messages: JobMessages

    @classmethod
    def of_workflow(cls, config: dict[str, Any], workflow: Any) -> SegmentContext:
        """The context of the ``predict:`` run ``config`` (checked, defaults filled in) under
        Snakemake's ``workflow``."""
        work_dir = Path(config["work_dir"])
        on_cluster = devices.on_cluster(workflow)
        visible = devices.visible_gpu_count()
        if config["predict"].get("device", "auto") == "cpu":
            shard_gpus = 0
        else:
            requested = devices.requested_gpus(workflow.global_resources)
            automatic = devices.gpus_per_fold_job(
                None, cluster=on_cluster, requested=requested, visible=visible
            )
            shard_gpus = min(1, automatic)
        return cls(
            work_dir=work_dir,
            logs=logs_dir(work_dir) / NEW_SCANS_FOLDER,
            shard_gpus=shard_gpus,
            shard_threads=job_threads.job_threads(
                None,
                cpu_jobs=shard_gpus == 0,
                cores=workflow.resource_settings.cores,
                cluster=on_cluster,
                parallel_gpu_jobs=max(1, visible),
            ),
            slot_flags=flags.prediction_slot_flags(
                config["training"], shard_gpus, cluster=on_cluster
            ),
            messages=JobMessages.of_dry_run(bool(workflow.output_settings.dryrun)),
        )
