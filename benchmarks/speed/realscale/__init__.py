"""Real scale (issue 34): `python -m benchmarks.speed.realscale` runs run.py; data, loader,
predict, record and setup are its parts, `python -m benchmarks.speed.realscale.predict` the
prediction stages alone."""
