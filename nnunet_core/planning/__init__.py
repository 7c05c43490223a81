"""Experiment planning: fingerprint, target spacing, topology, patch/batch size, plans files."""
