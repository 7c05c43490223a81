"""`python -m benchmarks.speed.predict_many`: the command stays the package's name."""

from benchmarks.speed.predict_many.run import main

if __name__ == "__main__":
    main()
