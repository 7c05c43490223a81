"""The whole pipeline, ours against upstream's: `python -m benchmarks.speed.pipeline` runs run.py;
ours, upstream, stages and monitor are its parts."""
