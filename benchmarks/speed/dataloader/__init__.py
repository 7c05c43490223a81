"""Loader throughput per worker: `python -m benchmarks.speed.dataloader` runs run.py; parts says
where a batch's time goes."""
