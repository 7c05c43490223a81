"""Preprocessing: crop to nonzero, normalize, resample, sample foreground locations, store."""
