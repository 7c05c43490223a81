"""mkdocs hooks (``hooks:`` in mkdocs.yml): the generated reference pages and the benchmark records.

The docs are markdown under ``docs/``; this adds, at build time, the two pages written from the
code (``reference/config.md``, ``reference/cli.md``) and the benchmark records of
``benchmarks/results/`` at the same path in the site, so that the conclusions' links to each record
are checked by ``mkdocs build --strict`` like any other link (a link out of ``docs/`` would not be).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from nnunet_core.reference.cli_flags import cli_reference
from nnunet_core.reference.config_keys import config_reference

SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"
# repository folders the site carries as they are (their pages and files keep their paths)
CARRIED = (Path("benchmarks") / "results",)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = Path(config.config_file_path).parent
    schema = yaml.safe_load((root / SCHEMA).read_text())
    files.append(File.generated(config, "reference/config.md", content=config_reference(schema)))
    files.append(File.generated(config, "reference/cli.md", content=cli_reference()))
    for folder in CARRIED:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file():
                src = path.relative_to(root).as_posix()
                files.append(File.generated(config, src, abs_src_path=str(path)))
    return files
