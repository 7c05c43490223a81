"""Everything that knows a scheduler or launcher, and the GPU slots of a shared machine.

- the environment a process runs under, one class each: ``slurm``, ``lsf_environment``,
  ``torchrun``, ``mpi``, ``local`` (base class: ``job_environment``); ``environment.detect``
  picks one and answers the job's end time and a rank's local place; ``process_topology``
  resolves a rank's ``Topology``;
- the stop signal before the walltime (``stop_signal``) and its relay on each node
  (``stop_relay``);
- what the workflow submits: commands and SLURM resources of a fold (``launch``), bsub options
  (``lsf``); local GPU slot locks (``gpu_slots``).
"""
