"""Everything that knows a scheduler or launcher, and the GPU slots of a shared machine.

One module per scheduler or launcher holds all we do differently under it (its job's id, end
time and variables, its submission or launch options, its stop signal): ``slurm``, ``lsf``,
``torchrun``, ``local``, and ``mpi`` (rank variables only). The rest is generic:

- ``job_environment`` (their base class); ``environment.detect`` picks one and answers the job's
  end time and a rank's local place; ``process_topology`` resolves a rank's ``Topology``;
- the stop signal before the walltime (``stop_signal``), its relay on each node
  (``stop_relay``) and the user's stop in a local workflow run (``user_stop``);
- exit statuses (``exit_codes``) and the retry runner of a fold (``retry``, ``no_retry``);
- local GPU slot locks (``gpu_slots``).
"""
