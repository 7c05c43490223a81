"""Every probe of the campaign, by kind, in the order they run."""

from __future__ import annotations

from benchmarks.security.probe import Probe
from benchmarks.security.probes import code, config, files, paths, zips


def all_probes() -> list[Probe]:
    found = [
        *config.probes(),
        *paths.probes(),
        *zips.probes(),
        *code.probes(),
        *files.probes(),
    ]
    names = [p.name for p in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"probe names used twice: {duplicates}")
    return found


def select(names: list[str] | None) -> list[Probe]:
    """The probes named (all when None); an unknown name is an error naming it."""
    found = all_probes()
    if not names:
        return found
    known = {p.name: p for p in found}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown probe(s): {', '.join(unknown)} (see --list)")
    return [known[n] for n in names]
