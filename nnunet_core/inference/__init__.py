"""Inference: sliding-window prediction of preprocessed cases and export to the input's space."""
