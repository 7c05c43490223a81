"""The text of the commands, SLURM resources and sbatch options that start a fold job
(nnunet_core.cluster.slurm, and the one-node command of nnunet_core.cluster.local).

These strings end up in sbatch lines and job shells on real clusters, where a wrong flag costs a
queue wait to find out; tests/cluster checks the sbatch lines the plugin builds from them.
"""

from __future__ import annotations

import shlex
import subprocess

from nnunet_core.cluster import local, slurm, stop_signal


def test_one_gpu_and_cpu_folds_run_the_trainer_directly() -> None:
    assert local.single_node_command(0) == "nnunet-core train"
    assert local.single_node_command(1) == "nnunet-core train"
    assert slurm.job_resources(1, 1) == {"gpu": 1}


def test_several_gpus_on_one_node_start_one_ddp_process_per_gpu() -> None:
    assert local.single_node_command(4) == "nnunet-core train -num_gpus 4"
    assert slurm.job_resources(1, 4) == {"gpu": 4}


def test_multi_node_command_is_srun_of_one_relayed_torchrun_agent_per_node() -> None:
    command = slurm.multi_node_command(3, 4, 32, rdzv_id="Dataset004_Hippocampus_3d_fullres_0")
    assert command == (
        "srun --nodes 3 --ntasks-per-node 1 --cpus-per-task 32 --kill-on-bad-exit=1 "
        "python -m nnunet_core.cluster.stop_relay "
        "python -m nnunet_core.training.torchrun_launch --nnodes 3 --nproc_per_node 4 "
        "--rdzv_backend c10d "
        '--rdzv_endpoint "$(hostname):$((29500 + ${SLURM_JOB_ID:-0} % 1000))" '
        "--rdzv_id Dataset004_Hippocampus_3d_fullres_0 -m nnunet_core.train"
    )


def test_a_configured_rendezvous_endpoint_is_used_verbatim() -> None:
    command = slurm.multi_node_command(2, 1, 8, rdzv_id="x", rdzv_endpoint="node17:29400")
    assert "--rdzv_endpoint node17:29400 --rdzv_id x" in command


def test_rendezvous_port_depends_on_the_job_id() -> None:
    """Evaluated by bash as the rule's shell does: two jobs sharing a first node differ."""
    endpoint = slurm.DEFAULT_RDZV_ENDPOINT
    ports = [
        subprocess.run(
            ["bash", "-c", f"echo {endpoint}"],
            env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": job},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for job in ("123456", "123457")
    ]
    hosts = {port.split(":")[0] for port in ports}
    assert len(hosts) == 1 and ports[0].endswith(":29956") and ports[1].endswith(":29957")


def test_multi_node_resources_ask_for_gpus_per_node_and_one_task_per_node() -> None:
    assert slurm.job_resources(2, 4) == {
        "gpu": 0,
        "nodes": 2,
        "tasks": 2,
        "mpi": "srun",
        "gres": "gpu:4",
        "tasks_per_gpu": 0,
    }
    cpu_only = slurm.job_resources(2, 0)
    assert "gres" not in cpu_only and cpu_only["nodes"] == 2


def test_cpus_per_node_follow_what_sbatch_was_asked_for() -> None:
    assert slurm.cpus_per_node(4, 8, threads=1) == 32  # --cpus-per-gpu=8 x 4 GPUs
    assert slurm.cpus_per_node(4, None, threads=6) == 6  # --cpus-per-task=threads
    assert slurm.cpus_per_node(0, 8, threads=0) == 1


def test_multi_node_guard_fails_outside_a_slurm_job() -> None:
    assert slurm.multi_node_guard(1) == ""
    guard = slurm.multi_node_guard(2)
    outside = subprocess.run(
        ["bash", "-c", guard + "echo ran"],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert outside.returncode == 2 and "ran" not in outside.stdout
    assert "training.nodes is 2" in outside.stderr and "SLURM" in outside.stderr
    inside = subprocess.run(
        ["bash", "-c", guard + "echo ran"],
        env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "7"},
        capture_output=True,
        text=True,
    )
    assert inside.returncode == 0 and inside.stdout.strip() == "ran"


def test_a_configured_endpoint_and_the_rendezvous_id_are_one_word_each() -> None:
    """Config values: quoted, never run; only the default endpoint is the shell's to evaluate."""
    command = slurm.multi_node_command(2, 1, 8, rdzv_id="D_3d;x", rdzv_endpoint="$(touch X) host:1")
    words = shlex.split(command)
    assert words[words.index("--rdzv_endpoint") + 1] == "$(touch X) host:1"
    assert words[words.index("--rdzv_id") + 1] == "D_3d;x"


def test_the_sbatch_signal_option_names_the_configured_stop_signal() -> None:
    assert slurm.stop_signal_option(600, {stop_signal.ENV_VAR: "USR2"}) == "--signal=USR2@600"
    assert slurm.stop_signal_option(600, {}) == "--signal=USR1@600"


def test_a_multi_node_fold_in_a_run_that_executes_here_is_refused_in_one_line() -> None:
    line = slurm.multi_node_refusal(3)
    assert line.startswith("config training.nodes: 3 needs the SLURM executor")
    assert "\n" not in line
