"""The `.test/` scenarios: what each config holds, and its `# Run:` line as printed (issue 15).

Every scenario's header command is run from a folder that looks like a fresh checkout
(``readme_commands.mirror_checkout``), with only ``-n`` added where the line is a real run. The
dry runs that assert train jobs run where the demo's plans exist (train jobs are known only after
the `plan` checkpoint): the demo's own line with the plans as target, run once for real. The dry
runs are started together (each Snakemake start here waits ~9 s for a SLURM controller the
installed SLURM plugin asks about), so the module takes about half a minute.
"""

from __future__ import annotations

import copy
import importlib.util
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from tests.helpers.readme_commands import mirror_checkout, with_flags
from tests.helpers.workflow import DATASET, REPO, SCENARIOS, SCHEMA, job_counts, scenario_config

NAMES = ("demo", "2d", "ensemble_wins", "multi_gpu_dryrun", "slurm_dryrun")
PLANS = f"work/preprocessed/{DATASET}/nnUNetPlans.json"
SLURM_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None
NO_SLURM_PLUGIN = "the SLURM executor plugin is not installed (make install-slurm)"
_RUN = re.compile(r"^# Run: (.+)$", re.M)


def run_line(name: str) -> str:
    """The command a scenario's header prints (its one ``# Run:`` line)."""
    lines = _RUN.findall((SCENARIOS / name / "config.yaml").read_text())
    assert len(lines) == 1, f".test/{name}/config.yaml: expected one '# Run:' line, got {lines}"
    return lines[0].strip()


def dry_run_line(name: str) -> str:
    command = run_line(name)
    return command if "-n" in shlex.split(command) else with_flags(command, "-n")


def layers(name: str) -> list[str]:
    """The scenarios named by the ``--configfile`` of a scenario's Run line, in order."""
    words = shlex.split(run_line(name))
    files = []
    for word in words[words.index("--configfile") + 1 :]:
        if word.startswith("-"):
            break
        files.append(word)
    return [Path(file).parent.name for file in files]


def checkout(target: Path) -> Path:
    """A mirror checkout that has `.test/` also while it is not yet tracked."""
    mirror_checkout(target)
    if not (target / ".test").exists():
        (target / ".test").symlink_to(SCENARIOS)
    return target


def run(command: str, cwd: Path) -> str:
    result = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"`{command}` failed ({result.returncode}):\n{output[-5000:]}"
    return output


def rule_blocks(output: str, rule: str) -> list[str]:
    """The dry run's printed job blocks of ``rule`` (up to the next job)."""
    blocks = re.split(r"\n(?=\[[^\n]*\]\n(?:localrule|rule|checkpoint) )", output)
    return [b for b in blocks if re.search(rf"^(?:localrule|rule) {rule}:$", b, re.M)]


def field(block: str, name: str) -> str:
    return re.search(rf"^\s+{name}: (.*)$", block, re.M).group(1)


def train_commands(output: str) -> list[str]:
    return [line for line in output.splitlines() if "nnunet-core train " in line]


# ----------------------------------------------------------------------- the config files
def _defaults(config: dict) -> dict:
    config = copy.deepcopy(config)
    validate(config, str(SCHEMA), set_default=True)
    return config


def _schema_defaults() -> dict:
    """What the schema gives a config that names only a dataset (its required id and name)."""
    config = _defaults({"dataset": {"id": 1, "name": "required"}})
    del config["dataset"]["id"], config["dataset"]["name"]
    return config


def _leaves(config: dict, prefix: str = ""):
    for key, value in config.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _get(config: dict, dotted: str):
    for key in dotted.split("."):
        if not isinstance(config, dict) or key not in config:
            return "<not set>"
        config = config[key]
    return config


def test_demo_scenario_is_config_demo_on_the_smaller_dataset() -> None:
    """After the schema's defaults, the demo scenario is config/demo.yaml but for the sizes and
    the lesion (the demo's larger one is learned in its 3 x 10 iterations; the tests keep the
    default data, which every test and benchmark shares) and the report's print versions."""
    demo = _defaults(yaml.safe_load((REPO / "config" / "demo.yaml").read_text()))
    demo["dataset"]["synthetic"].update(
        num_training=6, num_test=2, shape=[12, 32, 32], lesion_scale=1.0
    )
    demo["report"]["print_figures"] = False
    assert scenario_config("demo") == demo


@pytest.mark.parametrize("name", NAMES)
def test_a_scenario_holds_only_what_makes_it(name) -> None:
    """Each value of a file differs from what the layers before it (or the schema) give, and the
    Run line's layers are `demo` then the scenario itself."""
    names = layers(name)
    assert names == (["demo"] if name == "demo" else ["demo", name]), run_line(name)
    before = scenario_config(*names[:-1]) if names[:-1] else _schema_defaults()
    own = yaml.safe_load((SCENARIOS / name / "config.yaml").read_text())
    repeated = [key for key, value in _leaves(own) if _get(before, key) == value]
    assert not repeated, f".test/{name}/config.yaml repeats {repeated}"
    assert ("dataset" in own) == (name == "demo"), "only the demo layer names the dataset"


# ----------------------------------------------------------------------- the dry runs
@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> Path:
    """A checkout where the demo scenario's own Run line made the plans (target added)."""
    folder = checkout(tmp_path_factory.mktemp("scenarios") / "planned")
    run(with_flags(run_line("demo"), PLANS), folder)
    assert (folder / PLANS).is_file()
    return folder


@pytest.fixture(scope="module")
def dry_runs(planned) -> dict[str, str]:
    """The output of every scenario's dry run, each in its own copy of ``planned``, and of the
    demo's in a fresh checkout (``demo_from_scratch``); started together."""
    root = planned.parent
    folders = {"demo_from_scratch": checkout(root / "scratch")}
    for name in NAMES:
        if name != "slurm_dryrun" or SLURM_PLUGIN:
            folders[name] = shutil.copytree(planned, root / name, symlinks=True)
    started = {}
    for name, folder in folders.items():
        command = dry_run_line(name.removesuffix("_from_scratch"))
        process = subprocess.Popen(
            ["bash", "-c", command],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started[name] = (command, process)
    outputs = {name: process.communicate(timeout=300)[0] for name, (_, process) in started.items()}
    for name, (command, process) in started.items():
        assert process.returncode == 0, f"`{command}` failed:\n{outputs[name][-5000:]}"
    assert not (folders["demo_from_scratch"] / "work").exists(), "a dry run wrote work/"
    return outputs


@pytest.mark.slow
def test_demo_from_scratch_plans_what_the_tiny_config_plans(dry_runs) -> None:
    """As test_workflow_foundation's dry run of tiny_config: the stages up to the plans."""
    counts = job_counts(dry_runs["demo_from_scratch"])
    for rule in ("synthesize_dataset", "verify_dataset", "fingerprint", "plan", "splits"):
        assert counts.get(rule) == 1, counts


@pytest.mark.slow
def test_demo_plans_the_full_job_table(dry_runs) -> None:
    counts = job_counts(dry_runs["demo"])
    assert counts == {
        "preprocess": 2,  # 2d and 3d_fullres
        "splits": 1,  # not made by the plans run
        "train": 10,  # 2 configurations x 5 folds
        "crossval": 2,
        "ensemble_cv": 1,
        "select": 1,  # a checkpoint: prediction jobs follow from the selection
        "postprocess": 1,
        "evaluate_test": 1,
        "report": 1,
        "all": 1,
    }
    commands = train_commands(dry_runs["demo"])
    assert all("--epochs 3 --iterations 10 --val-iterations 2" in c for c in commands), commands


@pytest.mark.slow
def test_2d_trains_only_2d_and_has_no_ensemble(dry_runs) -> None:
    output = dry_runs["2d"]
    counts = job_counts(output)
    assert counts["train"] == 5 and counts["preprocess"] == 1 and counts["crossval"] == 1, counts
    assert "ensemble_cv" not in counts, counts
    wildcards = [field(block, "wildcards") for block in rule_blocks(output, "train")]
    assert sorted(wildcards) == [f"configuration=2d, fold={fold}" for fold in range(5)]


@pytest.mark.slow
def test_multi_gpu_fold_jobs_ask_for_two_gpus_and_run_ddp(dry_runs) -> None:
    output = dry_runs["multi_gpu_dryrun"]
    blocks = rule_blocks(output, "train")
    assert len(blocks) == 10, job_counts(output)
    for block in blocks:
        assert re.search(r"(^|, )gpu=2(,|$)", field(block, "resources")), block
    commands = train_commands(output)
    assert len(commands) == 10 and all("nnunet-core train -num_gpus 2 " in c for c in commands)


@pytest.mark.slow
@pytest.mark.skipif(not SLURM_PLUGIN, reason=NO_SLURM_PLUGIN)
def test_slurm_plans_sbatch_jobs_and_a_gpu_per_fold(dry_runs) -> None:
    """The profile's settings reach the jobs (what test_sbatch_lines checks on sbatch's lines:
    one GPU per fold, the gpu partition, the walltime warning), without a cluster."""
    output = dry_runs["slurm_dryrun"]
    assert "Using profiles profiles/slurm" in output
    train = [field(block, "resources") for block in rule_blocks(output, "train")]
    assert len(train) == 10, job_counts(output)
    for resources in train:
        items = resources.split(", ")
        assert "gpu=1" in items and "slurm_partition=gpu" in items, resources
        assert "slurm_extra=--signal=USR1@600" in items, resources
        assert "cpus_per_gpu=1" in items, resources  # the demo's 0 data workers + the trainer
    # the CPU rules get the profile's default resources (the cpu partition), not a GPU
    for block in rule_blocks(output, "preprocess"):
        items = field(block, "resources").split(", ")
        assert "slurm_partition=cpu" in items and not any(i.startswith("gpu=") for i in items)
    commands = train_commands(output)
    assert len(commands) == 10 and not any("-num_gpus" in c for c in commands)
    assert "lsf_extra" not in output  # an LSF-only resource (issue 36)
