"""``python -m nnunet_core.training.torchrun_launch ARGS``: torchrun (same arguments) that exits
with ``stop_signal.EXIT_STOPPED`` when the fold stopped cleanly (stop signal or deadline).

torchrun turns any worker's non-zero exit into its own exit status 1, so the workflow could not
tell a stopped fold (to retry with ``--c``) from a crashed one. Every rank of a stopped fold
exits ``EXIT_STOPPED``; torchrun ends the ranks still shutting down once the first has exited,
so the first rank to end decides: ``EXIT_STOPPED`` is passed on, anything else stays torchrun's
failure. The multi-node launcher (nnunet_core.cluster.launch) runs this in place of ``torchrun``.

Before torchrun starts a rank, ``--nproc_per_node N`` of a CUDA fold is checked against the GPUs
visible on this node (``gpu_ordinals.check_visible``): one line and exit 2 instead of rank N-1
dying in CUDA with "invalid device ordinal" after the others started.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from nnunet_core.errors import ConfigurationError
from nnunet_core.training.gpu_ordinals import check_visible

TRAINER_MODULE = "nnunet_core.train"  # what the multi-node launcher has torchrun start
GPU_DEVICES = (None, "auto", "cuda")  # the trainer's -device values that put a rank on a GPU


def device_flag(training_args: Sequence[str]) -> str | None:
    """The trainer's ``-device`` value among its arguments (None when not given)."""
    for i, arg in enumerate(training_args):
        if arg in ("-device", "--device") and i + 1 < len(training_args):
            return training_args[i + 1]
        if arg.startswith(("-device=", "--device=")):
            return arg.split("=", 1)[1]
    return None


def check_processes(argv: Sequence[str]) -> None:
    """Refuse more processes per node than visible GPUs, for a fold (our trainer's module) that
    trains on CUDA; any other program torchrun starts is its own business."""
    import torch
    from torch.distributed.run import get_args_parser

    args = get_args_parser().parse_args(list(argv))
    nproc = str(args.nproc_per_node)
    if not (args.module and args.training_script == TRAINER_MODULE) or not nproc.isdigit():
        return  # "gpu"/"auto" count the GPUs themselves
    if not torch.cuda.is_available():
        return  # the ranks share the CPU
    if device_flag(args.training_script_args) in GPU_DEVICES:
        check_visible(int(nproc), f"--nproc_per_node {nproc}")


def main(argv: Sequence[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        check_processes(argv)
    except ConfigurationError as exc:
        print(f"torchrun: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    try:
        torchrun_main(argv)
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        if failure.exitcode != EXIT_STOPPED:
            raise
        print(
            f"torchrun: rank {rank} stopped cleanly (exit {EXIT_STOPPED}): the retry continues "
            "with --c",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_STOPPED
    return 0


if __name__ == "__main__":
    sys.exit(main())
