"""``python -m nnunet_core.train ...`` is ``nnunet-core train ...`` (the entry point for
torchrun)."""

from __future__ import annotations

import sys

from nnunet_core.cli import main


def entry() -> int:
    return main(["train", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(entry())
