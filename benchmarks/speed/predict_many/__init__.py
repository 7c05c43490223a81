"""Many new scans through the workflow's prediction mode: `python -m benchmarks.speed.predict_many`
runs run.py; setup, sides and profile are its parts."""
