"""The tree names are spelled in ``nnunet_core/layout/`` only.

A second spelling of ``imagesTr`` or ``checkpoint_final.pth`` drifts: a rule declares one name, a
command writes another, and the workflow waits for a file that never comes. So every module and
every Snakemake file imports the names from ``nnunet_core.layout``. Docstrings and comments may
mention them (they explain); string literals in code may not, error messages included (they use
the constant in an f-string).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
LAYOUT = REPO / "nnunet_core" / "layout"
SOURCE_FOLDERS = (REPO / "nnunet_core", REPO / "workflow")

# Names of the raw tree, matched as words (``imagesTr/x`` and ``in imagesTr`` both count).
RAW_FOLDER_NAMES = re.compile(r"\b(imagesTr|labelsTr|imagesTs|labelsTs)\b")
# File and folder names of the preprocessed, results and work trees, matched anywhere in a literal.
TREE_NAMES = (
    "dataset_fingerprint.json",
    "splits_final.json",
    "preprocess_summary.json",
    "gt_segmentations",
    "_seg.b2nd",
    "checkpoint_final.pth",
    "checkpoint_latest.pth",
    "checkpoint_best.pth",
    "crossval_results_folds_",
    "predicted_next_stage",
    "inference_information.json",
    "test_summary.json",
    ".workflow.lock",
    ".training.lock",
    "reproduce.tar.gz",
)


def tree_name_in(text: str) -> str | None:
    """The first tree name ``text`` spells, else None."""
    if match := RAW_FOLDER_NAMES.search(text):
        return match.group(1)
    return next((name for name in TREE_NAMES if name in text), None)


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class or function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def python_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal of a Python module except docstrings (comments are
    not in the syntax tree); the constant parts of f-strings count."""
    tree = ast.parse(source)
    docstrings = _docstring_nodes(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def snakemake_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string token of a Snakemake file except comments and triple-quoted
    strings (docstrings of its functions); Snakemake's syntax is not Python's, its tokens are."""
    literals = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.STRING and not token.string.lstrip("rbfuRBFU").startswith(
            ('"""', "'''")
        ):
            literals.append((token.start[0], token.string))
    return literals


def spelled_names(path: Path) -> list[str]:
    """``file:line: name`` for every tree name a literal of ``path`` spells."""
    source = path.read_text(encoding="utf-8")
    literals = python_literals(source) if path.suffix == ".py" else snakemake_literals(source)
    return [
        f"{path.relative_to(REPO)}:{line}: {name}"
        for line, text in literals
        if (name := tree_name_in(text)) is not None
    ]


def checked_files() -> list[Path]:
    files = []
    for folder in SOURCE_FOLDERS:
        files += [p for p in folder.rglob("*.py") if LAYOUT not in p.parents]
        files += folder.rglob("*.smk")
    files.append(REPO / "Snakefile")
    return sorted(files)


def test_no_module_or_rule_outside_layout_spells_a_tree_name() -> None:
    found = [hit for path in checked_files() for hit in spelled_names(path)]
    assert found == [], "import these names from nnunet_core.layout:\n" + "\n".join(found)


def test_the_scan_covers_the_package_and_the_rules() -> None:
    names = {p.name for p in checked_files()}
    assert {"Snakefile", "predict.smk", "paths.smk", "discovery.py", "runs.py"} <= names
    assert not any(LAYOUT in p.parents for p in checked_files())


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('folder = raw / "imagesTr"\n', ["imagesTr"]),
        ('msg = f"{raw}: no training cases in labelsTs"\n', ["labelsTs"]),
        ('LOCK = ".workflow.lock"\n', [".workflow.lock"]),
        ('"""Cases of imagesTr."""\nx = 1  # imagesTs\n', []),
        ("def f():\n    '''Reads imagesTr/.'''\n    return IMAGES_TR\n", []),
        ('name = "imagesTrain"\n', []),
    ],
)
def test_a_spelled_name_is_found_in_code_but_not_in_docs(
    tmp_path: Path, source: str, expected: list[str]
) -> None:
    module = tmp_path / "module.py"
    module.write_text(source)
    found = [name for _, text in python_literals(source) if (name := tree_name_in(text))]
    assert found == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('rule a:\n    params:\n        images=RAW / "imagesTs",\n', ["imagesTs"]),
        ('# RAW / "imagesTs"\nrule a:\n    shell:\n        "echo"\n', []),
        ('def f():\n    """Synthetic data always has labelsTs."""\n    return 1\n', []),
    ],
)
def test_a_spelled_name_is_found_in_a_rule_file(source: str, expected: list[str]) -> None:
    found = [name for _, text in snakemake_literals(source) if (name := tree_name_in(text))]
    assert found == expected
