"""Config paths no quoting makes safe, refused in one line (nnunet_core.workflow.path_values)."""

from __future__ import annotations

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.workflow.path_values import check_shell_paths


def config(**values) -> dict:
    return {
        "work_dir": values.get("work_dir", "/w"),
        "dataset": {"raw_root": values.get("raw_root")},
        "training": {
            "pretrained_weights": values.get("pretrained"),
            "trainer": values.get("trainer", "nnUNetTrainer"),
            "gpu_lock_dir": values.get("gpu_lock_dir"),
        },
    }


def test_odd_characters_pass_the_rules_quote_them() -> None:
    odd = "/tmp/odd wd 'q' \"dq\" $(touch X) `touch Y` ;x |y ünï/-lead"
    check_shell_paths(config(work_dir=odd, raw_root=odd, pretrained={"model": odd}))
    check_shell_paths(config(trainer=f"{odd}/w$(touch$IFS/x)/t.py:Mine", gpu_lock_dir=odd))
    check_shell_paths(config(work_dir="relative/-lead", raw_root=None))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"work_dir": "-wd"}, "config work_dir: '-wd' starts with '-'"),
        ({"raw_root": "-raw/x"}, "config dataset.raw_root: '-raw/x' starts with '-'"),
        ({"pretrained": "-m.pth"}, "config training.pretrained_weights: '-m.pth' starts"),
        (
            {"pretrained": {"model": "-m.zip"}},
            "config training.pretrained_weights.model: '-m.zip' starts",
        ),
        ({"work_dir": "/w/{x}"}, "config work_dir: '/w/{x}' holds { and }, which Snakemake"),
        ({"raw_root": "/r/a}"}, "config dataset.raw_root: '/r/a}' holds }, which Snakemake"),
        # the rules' params carry these as text, which Snakemake formats with wildcards
        (
            {"trainer": "/p/w$(touch${IFS}M)/t.py:Mine"},
            "config training.trainer: '/p/w$(touch${IFS}M)/t.py:Mine' holds { and }, which",
        ),
        ({"gpu_lock_dir": "/l/{x}"}, "config training.gpu_lock_dir: '/l/{x}' holds { and }"),
    ],
)
def test_a_dash_first_or_a_brace_is_refused_in_one_line(values: dict, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        check_shell_paths(config(**values))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
