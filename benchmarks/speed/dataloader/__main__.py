"""`python -m benchmarks.speed.dataloader`: the command stays the package's name."""

from benchmarks.speed.dataloader.run import main

if __name__ == "__main__":
    main()
