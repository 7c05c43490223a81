"""Pictures of cases for people: a slice of an image with its labels overlaid in colour.

Numpy only (plus matplotlib's PNG writer), below every package that shows cases, so
``plot-overlay-pngs``, the report and a prediction check draw the same picture.
"""
