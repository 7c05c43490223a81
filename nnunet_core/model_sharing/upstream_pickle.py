"""Upstream's ``postprocessing.pkl``, written from our ``postprocessing.json`` for upstream's users.

We never read it (pickles run code on load); it goes into exported archives so that
``nnUNetv2_apply_postprocessing -pp_pkl_file`` works on them. Upstream's
``determine_postprocessing`` pickles the tuple ``(pp_fns, pp_fn_kwargs)``: a list of functions
(by reference: ``nnunetv2.postprocessing.remove_connected_components.
remove_all_but_largest_component_from_segmentation``) and a list of ``{"labels_or_regions": v}``
with ``v`` the list of foreground labels for the first step (all foreground together) and a label
(int) or region (tuple of ints) for a per-class step. Upstream's labels are numpy integers, which
compare equal to the plain ints written here.

The function reference is written as a pickle global (module and name) without importing
nnunetv2: a pure-Python pickler with one extra entry in its dispatch table.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.evaluation.postprocessing_file import read_postprocessing

UPSTREAM_MODULE = "nnunetv2.postprocessing.remove_connected_components"
KEEP_LARGEST = "remove_all_but_largest_component_from_segmentation"
PROTOCOL = 4  # pickle's default protocol on the Pythons upstream supports (3.10-3.13)
ALL_FOREGROUND = "all foreground"  # the scope ``steps_tried`` gives upstream's first step


@dataclass(frozen=True)
class GlobalRef:
    """A module-level object named by module and name, pickled as a reference to it."""

    module: str
    name: str


class _RefPickler(pickle._Pickler):  # noqa: SLF001 - the pure-Python pickler has a dispatch table
    dispatch = pickle._Pickler.dispatch.copy()  # noqa: SLF001

    def save_ref(self, ref: GlobalRef) -> None:
        self.save(ref.module)
        self.save(ref.name)
        self.write(pickle.STACK_GLOBAL)
        self.memoize(ref)

    dispatch[GlobalRef] = save_ref


def dumps(obj: Any) -> bytes:
    """``pickle.dumps`` with :class:`GlobalRef` written as the global it names."""
    buffer = io.BytesIO()
    _RefPickler(buffer, protocol=PROTOCOL).dump(obj)
    return buffer.getvalue()


def _as_region(value: Any) -> Any:
    """JSON lists back to upstream's tuples (regions); ints stay ints."""
    if isinstance(value, list):
        return tuple(_as_region(v) for v in value)
    return int(value)


def upstream_steps(content: dict[str, Any], source: Path) -> tuple[list, list]:
    """``(pp_fns, pp_fn_kwargs)`` of a ``postprocessing.json`` (ours or upstream's)."""
    names, kwargs = content.get("postprocessing_fns"), content.get("postprocessing_kwargs")
    if not isinstance(names, list) or not isinstance(kwargs, list) or len(names) != len(kwargs):
        msg = f"{source}: no postprocessing_fns/postprocessing_kwargs lists of one length"
        raise ConfigurationError(msg)
    unknown = sorted({n for n in names if n != KEEP_LARGEST})
    if unknown:
        msg = f"{source}: postprocessing function(s) {', '.join(unknown)} unknown to upstream"
        raise ConfigurationError(msg)
    tried = content.get("steps_tried")
    tried = [s for s in tried if isinstance(s, dict)] if isinstance(tried, list) else []
    scopes = [s.get("scope") for s in tried if s.get("accepted")]
    fns, out = [], []
    for index, step in enumerate(kwargs):
        value = step["labels_or_regions"]
        whole = scopes[index] == ALL_FOREGROUND if len(scopes) == len(kwargs) else index == 0
        if whole and isinstance(value, list):  # upstream's first step: a list of labels
            value = [_as_region(v) for v in value]
        else:
            value = _as_region(value)
        fns.append(GlobalRef(UPSTREAM_MODULE, KEEP_LARGEST))
        out.append({"labels_or_regions": value})
    return fns, out


def postprocessing_pickle(json_file: Path) -> bytes:
    """The bytes of upstream's ``postprocessing.pkl`` for ``json_file``."""
    content, _ = read_postprocessing(json_file, ConfigurationError)  # one line if malformed
    return dumps(upstream_steps(content, json_file))
