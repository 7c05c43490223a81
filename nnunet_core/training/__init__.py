"""Training one fold of nnU-Net, one question per sub-package:

- ``trainer/``: the training loop (``Trainer``) and its settings, ``-tr`` names, log, progress
- ``fold/``: a fold's setup, lifecycle, lock, provenance, final validation, cascade handover
- ``data/``: cases, patch sampling, batch loaders and the worker processes that build them
- ``augmentation/``: upstream's training augmentation

and beside them the recipe (``loss``, ``deep_supervision``, ``optimizer``, ``eager_sgd``,
``determinism``), DDP (``distributed``, ``gpu_ordinals``, ``torchrun_launch``), ``limits`` and
``stop_conditions``.
"""
