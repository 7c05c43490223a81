"""Upstream's side as the benchmarks run it: env (the environment its commands see), trainer (its
trainer classes for a schedule, written into the peer venv)."""
