"""Helpers for running on shared machines and clusters (GPU slots, schedulers)."""
