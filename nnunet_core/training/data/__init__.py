"""Training batches: which patch each sample reads, and the workers that build batches.

- ``case_store``: a data folder's cases, opened lazily
- ``patch_sampling``: per-sample generators and where a patch is cut (foreground oversampling)
- ``patch_loader``: a batch from sampled, augmented patches; ``fold_loaders``: a fold's two
- ``workers``, ``pinning``: batches built in worker processes, pinned for the GPU
"""
