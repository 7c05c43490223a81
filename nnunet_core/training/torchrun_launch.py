"""``python -m nnunet_core.training.torchrun_launch ARGS``: torchrun (same arguments) that exits
with ``stop_signal.EXIT_STOPPED`` when the fold stopped cleanly (``cluster.torchrun.launch``).

What this entry point adds, and why it lives in training/: before torchrun starts a rank,
``--nproc_per_node N`` of a CUDA fold is checked against the GPUs visible on this node
(``gpu_ordinals.check_visible``): one line and exit 2 instead of rank N-1 dying in CUDA with
"invalid device ordinal" after the others started. The multi-node launcher
(``nnunet_core.cluster.slurm.multi_node_command``) runs this in place of ``torchrun``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from nnunet_core.cluster import torchrun
from nnunet_core.training.gpu_ordinals import check_visible


def check_processes(argv: Sequence[str]) -> None:
    """Refuse more processes per node than visible GPUs, for a fold that trains on CUDA."""
    nproc = torchrun.cuda_ranks_per_node(argv)
    if nproc is not None:
        check_visible(nproc, f"--nproc_per_node {nproc}")


def main(argv: Sequence[str] | None = None) -> int:
    return torchrun.launch(sys.argv[1:] if argv is None else argv, check=check_processes)


if __name__ == "__main__":
    sys.exit(main())
