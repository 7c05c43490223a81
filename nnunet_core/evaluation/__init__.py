"""Evaluation: Dice/IoU per label or region and upstream's summary.json."""
