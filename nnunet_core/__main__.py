"""``python -m nnunet_core`` is ``nnunet-core``."""

import sys

from nnunet_core.cli import main

sys.exit(main())
