"""`python -m benchmarks.speed.pipeline`: the command stays the package's name."""

import sys

from benchmarks.speed.pipeline.run import main

if __name__ == "__main__":
    sys.exit(main())
