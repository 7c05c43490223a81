"""Upper bounds of the training numbers, shared by ``nnunet-core train`` and the workflow schema.

Not limits of the method: bounds far beyond any real run, so that a typo (``epochs: 10**30``)
is one line at the start instead of a run that never ends or a number that overflows later
(torch's seed takes 64 bits, a schedule's epoch counter is an int). ``workflow/schemas/
config.schema.yaml`` repeats them as ``maximum:`` (a unit test keeps the two equal).
"""

from __future__ import annotations

# upstream trains 1000 epochs of 250 iterations with 50 validation iterations; 100x that is
# already months on one GPU
MAX_EPOCHS = 100_000
MAX_ITERATIONS = 100_000  # per epoch, training and validation alike
# GPUs of one fold job on one machine (DDP processes); data workers of one fold job
MAX_GPUS = 64
MAX_WORKERS = 1024
# seconds kept free before a deadline: a year (a margin longer than the time left, e.g. 1e7 s,
# is a way to stop after the first epoch)
MAX_STOP_MARGIN = 365 * 24 * 3600
# numpy's and upstream's seeds are 32-bit
MAX_SEED = 2**32 - 1
