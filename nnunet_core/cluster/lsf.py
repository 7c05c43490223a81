"""The extra bsub options of the workflow's GPU jobs under the LSF executor plugin.

snakemake-executor-plugin-lsf maps no ``gpu`` resource: a job gets GPUs only through the
``lsf_extra`` resource, which the plugin appends to ``bsub`` as written. A profile cannot read
the workflow's config, so a hard-coded ``-gpu num=1`` there silently starts ``-num_gpus 4`` on
one GPU when ``training.gpus_per_job`` is 4. The train and predict rules therefore build their
``lsf_extra`` from the config here, and only for jobs the LSF executor submits: under any other
executor (SLURM, local, a dry run) the rules have no such resource, so their jobs show no LSF
key (``bsub_extra_for_executor``).

The job's side of LSF (its end time, read with ``bjobs``) is
``nnunet_core.cluster.lsf_environment``.

Sites that need more bsub options replace the whole value in their profile (``set-resources``
replaces a rule's resource, it does not append): profiles/lsf/profile.yaml shows the string.
"""

from __future__ import annotations

# Minutes before the run limit at which LSF sends the stop signal (bsub -wt), as the SLURM
# profile's --signal=...@600: one epoch and a checkpoint must fit in them.
WARNING_MINUTES = 10


# The LSF executor plugin's name (``snakemake --executor lsf``, profiles/lsf).
LSF_EXECUTOR = "lsf"


def bsub_extra_for_executor(
    executor: str | None, gpus: int, stop_signal: str | None = None
) -> str | None:
    """``bsub_extra`` for a job that ``executor`` (the Snakemake executor plugin's name, None
    before one is chosen) submits under LSF; None under any other, which Snakemake takes as no
    resource at all."""
    if executor != LSF_EXECUTOR:
        return None
    return bsub_extra(gpus, stop_signal)


def bsub_extra(
    gpus: int, stop_signal: str | None = None, warning_minutes: int = WARNING_MINUTES
) -> str:
    """``-gpu num=N`` (none for a CPU job, gpus 0), then ``-wa SIG -wt M`` when the job resumes.

    ``stop_signal``: the configured signal name (``USR1``; nnunet_core.cluster.stop_signal), which
    LSF's warning action sends ``warning_minutes`` before the run limit so that the trainer
    checkpoints and the retry continues; None for jobs that cannot resume (prediction).
    """
    options = []
    if gpus > 0:
        options.append(f"-gpu num={int(gpus)}")
    if stop_signal is not None:
        options.append(f"-wa {stop_signal} -wt {int(warning_minutes)}")
    return " ".join(options)
