"""One fold's lifecycle around the trainer: what it needs, what it records, when it starts over.

- ``setup``: plans, data folder, split and output folder of a fold (``FoldSetup``)
- ``run``: the ``train`` command's steps, from the parsed flags to a finished folder
- ``lock``, ``changes``, ``settings_table``, ``fingerprints``: one training per folder, and
  which changed setting starts a fold over
- ``provenance``, ``failures``: what produced a checkpoint, and whose failure ended a fold
- ``validation``, ``validation_resume``, ``previous_stage``, ``next_stage``: the final
  validation and the cascade's handover between stages
"""
