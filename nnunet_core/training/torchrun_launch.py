"""``python -m nnunet_core.training.torchrun_launch ARGS``: torchrun (same arguments) that exits
with ``stop_signal.EXIT_STOPPED`` when the fold stopped cleanly (stop signal or deadline).

torchrun turns any worker's non-zero exit into its own exit status 1, so the workflow could not
tell a stopped fold (to retry with ``--c``) from a crashed one. Every rank of a stopped fold
exits ``EXIT_STOPPED``; torchrun ends the ranks still shutting down once the first has exited,
so the first rank to end decides: ``EXIT_STOPPED`` is passed on, anything else stays torchrun's
failure. The multi-node launcher (nnunet_core.cluster.launch) runs this in place of ``torchrun``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from nnunet_core.cluster.stop_signal import EXIT_STOPPED


def main(argv: Sequence[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main(list(sys.argv[1:] if argv is None else argv))
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
