"""`python -m benchmarks.speed.realscale`: the command stays the package's name."""

from benchmarks.speed.realscale.run import main

if __name__ == "__main__":
    main()
