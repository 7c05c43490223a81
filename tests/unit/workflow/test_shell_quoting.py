"""Every value that reaches a rule's shell is quoted (issue 51), checked like a linter.

Snakemake's own parser translates each ``.smk`` file to Python; from that, each rule's shell
string and its ``params`` expressions. Every ``{field}`` of a shell must be ``:q``-quoted, or be
``{threads}``/``{resources.x}`` (numbers), or a param bound to a flag builder that quotes each
value itself (``PRE_QUOTED``), or a constant that needs no quoting. The builders, given hostile
values, produce strings that a real bash splits back into the values, one argument each, running
nothing. The end-to-end check with odd paths is tests/integration/test_odd_paths.py.
"""

from __future__ import annotations

import ast
import shlex
import string
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from snakemake import parser as snakemake_parser

from nnunet_core.cli import build_parser
from nnunet_core.cluster import slurm
from nnunet_core.layout.roots import Roots
from nnunet_core.training.trainer.lookup import consent_flag_for_trainer
from nnunet_core.workflow import flags, runs
from nnunet_core.workflow.pretrained import PretrainedWeights
from tests.helpers.paths import REPO

RULE_FILES = sorted((REPO / "workflow" / "rules").glob("*.smk")) + [REPO / "Snakefile"]
# Params that are whole flag strings, quoted value by value where they are built: the name the
# rules bind (a value or method of a context, RUN or SEGMENT, or a builder called in the rule)
# and the builder that makes it (each has a hostile-value case in BUILDER_CASES).
PRE_QUOTED = {
    "RUN.flags.roots": "root_flags",
    "RUN.flags.model": "model_flags",
    "RUN.flags.folds": "folds_argument",
    "RUN.flags.surface": "surface_metric_flags",
    "RUN.synthetic_options": "synthetic_options",
    "RUN.planning_options": "planning_options",
    "RUN.training_options": "training_options",
    "RUN.pretrained_weights_flag": "pretrained_weights_flag",
    "RUN.folds_per_gpu_variable": "folds_per_gpu_variable",
    "RUN.prediction_slot_flags": "prediction_slot_flags",
    "RUN.training_launcher": "training_launcher",
    "RUN.test_summary_flag": "report_test_summary_flag",
    "RUN.test_set_note_flag": "report_test_set_note_flag",
    "RUN.previous_stage_flag": "previous_stage_flag",
    "RUN.chosen_configurations_argument": "chosen_configurations_argument",
    "RUN.flags.model_code_consent": "consent_flag_for_trainer",
    "SEGMENT.slot_flags": "prediction_slot_flags",
    "slurm.multi_node_guard": "multi_node_guard",
    "paper_table_flags": "paper_table_flags",
    "methods_table_flags": "methods_table_flags",
    "reproduce_run_flags": "reproduce_run_flags",
    "shlex.join": "join",
}
CONTEXTS = {"RUN": "run_context.py", "SEGMENT": "segment_context.py"}  # where they are built
BOUND_IN_CONTEXTS = [name for name in PRE_QUOTED if name.split(".")[0] in CONTEXTS]


# ------------------------------------------------------------------------------ the checker
@dataclass
class RuleShell:
    """One rule's shell string (None: not a literal string) and its params' expressions."""

    where: str
    shell: str | None
    params: dict[str, ast.expr] = field(default_factory=dict)


class _Source:
    def __init__(self, path: Path) -> None:
        self.path = path

    def get_path_or_uri(self, **_: object) -> str:
        return str(self.path)


class _Workflow:
    """What snakemake.parser.parse uses of a workflow: a source cache that opens files."""

    class sourcecache:  # noqa: N801 - the attribute's name in Snakemake
        @staticmethod
        def open(source: _Source):
            return open(source.path, encoding="utf-8")


def translated(path: Path) -> ast.Module:
    """``path`` as the Python that Snakemake runs, parsed."""
    code, _ = snakemake_parser.parse(_Source(path), _Workflow(), {})
    return ast.parse(code)


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(target)


def rule_shells_of_code(tree: ast.Module, where: str) -> list[RuleShell]:
    rules = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        decorators = {_decorator_name(d): d for d in node.decorator_list}
        rule = decorators.get("workflow.rule")
        shell = decorators.get("workflow.shellcmd")
        if rule is None or shell is None:
            continue
        name = next(k.value.value for k in rule.keywords if k.arg == "name")
        text = shell.args[0] if shell.args else None
        literal = text.value if isinstance(text, ast.Constant) else None
        params = decorators.get("workflow.params")
        expressions = {k.arg: k.value for k in params.keywords if k.arg} if params else {}
        rules.append(RuleShell(f"{where}:{name}", literal, expressions))
    return rules


def rule_shells(path: Path) -> list[RuleShell]:
    return rule_shells_of_code(translated(path), path.name)


def is_pre_quoted(expression: ast.expr | None) -> bool:
    """A param whose value quotes itself: a PRE_QUOTED name, call or input function, or a
    constant (or a choice of constants) that a shell reads as itself."""
    if expression is None:
        return False
    if isinstance(expression, ast.Constant):
        return isinstance(expression.value, str) and (
            expression.value == "" or shlex.quote(expression.value) == expression.value
        )
    if isinstance(expression, ast.IfExp):
        return is_pre_quoted(expression.body) and is_pre_quoted(expression.orelse)
    if isinstance(expression, ast.Call):
        return ast.unparse(expression.func) in PRE_QUOTED
    return ast.unparse(expression) in PRE_QUOTED


def unquoted_fields(rule: RuleShell) -> list[str]:
    """The ``{fields}`` of the rule's shell that a hostile value could break out of."""
    if rule.shell is None:
        return ["<the shell is not a literal string>"]
    offending = []
    for _, name, spec, _ in string.Formatter().parse(rule.shell):
        if name is None or spec == "q":
            continue
        if name == "threads" or name.startswith("resources."):
            continue
        if name.startswith("params.") and is_pre_quoted(rule.params.get(name.split(".")[1])):
            continue
        offending.append("{" + name + (f":{spec}" if spec else "") + "}")
    return offending


# ------------------------------------------------------------------------- the rules, checked
@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_every_value_in_every_rule_shell_is_quoted(path: Path) -> None:
    found = {rule.where: unquoted_fields(rule) for rule in rule_shells(path)}
    assert {where: fields for where, fields in found.items() if fields} == {}


def test_the_rules_have_shells_to_check() -> None:
    """The checker reads the rules (a parser change that hid them would pass every file)."""
    names = [rule.where for path in RULE_FILES for rule in rule_shells(path)]
    assert {"train.smk:train", "predict.smk:predict", "paper.smk:paper_tables"} <= set(names)
    assert len(names) >= 20, names


SMK_WITH_UNQUOTED = """
rule bad:
    output:
        "out.txt",
    log:
        "a log.txt",
    params:
        roots=RUN.flags.roots,
        dataset=RUN.dataset,
        note="two words",
    shell:
        "nnunet-core verify -d {params.dataset} {params.roots} -o {output:q} > {log} 2>&1; "
        "echo {params.note} {wildcards.fold} {threads}"
"""


def test_the_checker_catches_an_unquoted_log_param_and_wildcard(tmp_path: Path) -> None:
    path = tmp_path / "bad.smk"
    path.write_text(SMK_WITH_UNQUOTED)
    (rule,) = rule_shells(path)
    assert unquoted_fields(rule) == [
        "{params.dataset}",
        "{log}",
        "{params.note}",
        "{wildcards.fold}",
    ]


def test_the_checker_refuses_a_shell_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "built.smk"
    path.write_text('rule built:\n    output:\n        "o",\n    shell:\n        COMMAND\n')
    (rule,) = rule_shells(path)
    assert unquoted_fields(rule) == ["<the shell is not a literal string>"]


def _calls_in(node: ast.AST) -> set[str]:
    return {
        ast.unparse(call.func).rsplit(".", 1)[-1]
        for call in ast.walk(node)
        if isinstance(call, ast.Call)
    }


def test_the_contexts_bind_each_pre_quoted_name_to_its_builder() -> None:
    """``RUN.flags.roots`` is the keyword ``roots=`` built by root_flags, ``RUN.training_launcher``
    the method that calls training_launcher."""
    built: dict[tuple[str, str], set[str]] = {}
    for context, file in CONTEXTS.items():
        for node in ast.walk(ast.parse((REPO / "nnunet_core" / "workflow" / file).read_text())):
            if isinstance(node, ast.FunctionDef):
                built.setdefault((context, node.name), set()).update(_calls_in(node))
            elif isinstance(node, ast.keyword) and node.arg:
                built.setdefault((context, node.arg), set()).update(_calls_in(node.value))
    for name in BOUND_IN_CONTEXTS:  # (the context, the method or keyword)
        assert PRE_QUOTED[name] in built.get((name.split(".")[0], name.rsplit(".", 1)[-1]), set())
    assert len(BOUND_IN_CONTEXTS) >= 16


# ------------------------------------------------------------------ the builders, hostile values
HOSTILE = [
    "/data/with space/x",
    "/data/it's/x",
    '/data/say "hi"/x',
    "/data/$(touch INJ_PAREN)/x",
    "/data/`touch INJ_TICK`/x",
    "/data/a;touch INJ_SEMI;/x",
    "/data/a|touch INJ_PIPE|/x",
    "/data/a && touch INJ_AND/x",
    "/data/${IFS}touch$IFS'INJ_IFS'",
    "/data/ünï ✓ 数据/x",
    "/data/-lead/x",
    "/data/tab\there/new\nline",
    "/data/*?[a]~/x",
    "-lead 'q' $(touch INJ_DASH)",
]


def _config(value: str) -> dict:
    training = {
        "trainer": f"{value}/t.py:MyTrainer",
        "epochs": 3,
        "iterations_per_epoch": 10,
        "val_iterations_per_epoch": 2,
        "save_every": 1,
        "stop_margin": 300,
        "num_workers": 0,
        "npz": True,
        "gpu_lock_dir": value,
        "nodes": 2,
        "rdzv_endpoint": value,
    }
    return {"seed": 7, "deterministic": True, "training": training}


def _paper_runs(value: str) -> list[runs.RunInstance]:
    config = {
        "work_dir": value,
        "datasets": [{"id": 901, "name": "Liver", "raw_root": f"{value}/raw"}],
        "seeds": [0, 1],
        "methods": [
            {"name": "nnunet", "trainer": "nnUNetTrainer", "baseline": True},
            {"name": "mine", "trainer": f"{value}/t.py:Mine"},
        ],
    }
    return runs.run_instances(config)


def _run_tokens(instances: list[runs.RunInstance]) -> list[str]:
    return [str(run.tree.results_dir) for run in instances]


# builder -> (value -> (the flag string, the arguments it must hold))
Case = Callable[[str], tuple[str, list[str]]]
BUILDER_CASES: dict[str, Case] = {
    "root_flags": lambda v: (
        flags.root_flags(Roots(Path(v), Path(f"{v}/pre"), Path(f"{v}/res"))),
        [v, f"{v}/pre", f"{v}/res"],
    ),
    "model_flags": lambda v: (flags.model_flags(v, f"{v}:T"), [v, f"{v}:T"]),
    "folds_argument": lambda v: (flags.folds_argument([0, v, "all"]), ["0", v, "all"]),
    "surface_metric_flags": lambda v: (
        flags.surface_metric_flags({"surface_metrics": True, "nsd_tolerance_mm": {v: 2}}),
        [f"{v}=2"],
    ),
    "synthetic_options": lambda v: (
        flags.synthetic_options(
            {"num_training": v, "num_test": 2, "channels": 1, "seed": 3, "shape": [v, 3]}
        ),
        [v],
    ),
    "planning_options": lambda v: (
        flags.planning_options({"planner": v, "gpu_memory_target_gb": None}, f"{v}P"),
        [v, f"{v}P"],
    ),
    "training_options": lambda v: (
        flags.training_options(_config(v), f"{v}P", f"{v}D"),
        [f"{v}/t.py:MyTrainer", f"{v}P", f"{v}D", v],
    ),
    "pretrained_weights_flag": lambda v: (
        flags.pretrained_weights_flag(PretrainedWeights(Path(v))),
        [v],
    ),
    "training_launcher": lambda v: (
        flags.training_launcher(
            _config(v)["training"], 2, job_gpus=0, cpus_per_gpu=4, threads=2, rendezvous_id=v
        ),
        [v],
    ),
    "prediction_slot_flags": lambda v: (
        flags.prediction_slot_flags(_config(v)["training"], 1, cluster=False),
        ["--gpu-slot", v],
    ),
    "report_test_summary_flag": lambda v: (flags.report_test_summary_flag(True, v), [v]),
    "report_test_set_note_flag": lambda v: (flags.report_test_set_note_flag(v), [v]),
    "previous_stage_flag": lambda v: (flags.previous_stage_flag([v]), [v]),
    "chosen_configurations_argument": lambda v: (
        flags.chosen_configurations_argument(["2d", v]),
        ["2d", v],
    ),
    "paper_table_flags": lambda v: (
        runs.paper_table_flags(_paper_runs(v)[:2]),
        _run_tokens(_paper_runs(v)[:2]),
    ),
    "methods_table_flags": lambda v: (
        runs.methods_table_flags(_paper_runs(v)),
        _run_tokens(_paper_runs(v)),
    ),
    "reproduce_run_flags": lambda v: (
        runs.reproduce_run_flags(_paper_runs(v)),
        [f"{v}/raw/Dataset901_Liver", *_run_tokens(_paper_runs(v))],
    ),
    "join": lambda v: (shlex.join(["--job-logs", v, f"{v}/2"]), [v, f"{v}/2"]),
}
# Builders whose words hold no value of a user's: integers of the schema, or a fixed flag.
FIXED_WORDS: dict[str, Callable[[], str]] = {
    "folds_per_gpu_variable": lambda: flags.folds_per_gpu_variable(3),
    "multi_node_guard": lambda: slurm.multi_node_guard(2),
    "consent_flag_for_trainer": lambda: consent_flag_for_trainer(f"{HOSTILE[3]}/t.py:Mine"),
}


def test_every_pre_quoted_builder_has_a_case() -> None:
    assert set(PRE_QUOTED.values()) == set(BUILDER_CASES) | set(FIXED_WORDS)


def bash_words(text: str, folder: Path) -> list[str]:
    """The arguments a real bash makes of ``text`` (run in ``folder``)."""
    script = f'set -- {text}\nprintf "%s\\0" "$@"'
    result = subprocess.run(["bash", "-c", script], cwd=folder, capture_output=True, check=True)
    return result.stdout.decode().split("\0")[:-1]


@pytest.mark.parametrize("builder", sorted(BUILDER_CASES))
def test_a_builder_passes_hostile_values_as_single_arguments(builder: str, tmp_path: Path) -> None:
    for value in HOSTILE:
        text, expected = BUILDER_CASES[builder](value)
        words = bash_words(text, tmp_path)
        assert words == shlex.split(text), (value, text)
        for token in expected:  # as an argument, or as FLAG=VALUE where it starts with '-'
            assert any(w == token or w.endswith(f"={token}") for w in words), (token, words)
        assert sorted(p.name for p in tmp_path.iterdir()) == [], (value, text)


@pytest.mark.parametrize("builder", sorted(FIXED_WORDS))
def test_a_fixed_builder_writes_only_plain_words(builder: str) -> None:
    text = FIXED_WORDS[builder]()
    if builder == "multi_node_guard":  # a guard line: its one value is the node count
        assert "training.nodes is 2:" in text
    else:
        assert text and all(shlex.quote(w) == w for w in shlex.split(text)), text


# --------------------------------------------------------------- a value starting with a dash
def test_values_starting_with_a_dash_reach_the_train_command_as_values() -> None:
    """argparse reads ``--raw -r`` as a missing value: such values go as ``--raw=-r``."""
    config = _config("-locks")
    config["training"]["trainer"] = "-t.py:MyTrainer"
    options = flags.training_options(config, "-plans", "cpu")
    roots = flags.root_flags(Roots(Path("-r"), Path("-p"), Path("-x")))
    argv = ["train", "900", "3d_fullres", "0", *shlex.split(options), *shlex.split(roots)]
    args = build_parser("train").parse_args(argv)
    assert (args.trainer, args.plans, args.gpu_lock_dir) == ("-t.py:MyTrainer", "-plans", "-locks")
    assert (args.raw, args.preprocessed, args.results) == ("-r", "-p", "-x")


def test_option_keeps_an_ordinary_value_apart() -> None:
    assert flags.option("--raw", "/w/raw") == "--raw /w/raw"
    assert flags.option("--raw", "/w/my raw") == "--raw '/w/my raw'"
    assert flags.option("--raw", "-r") == "--raw=-r"
    assert shlex.split(flags.option("-tr", "-it's")) == ["-tr=-it's"]
