"""A user trainer's class and its ``Trainer`` base, checked by reading the file: nothing runs.

``training.trainer: /path/file.py:MyTrainer`` (or ``package.module:MyTrainer``, or a bare name
found under ``nnUNet_extTrainer``) is imported only inside the train jobs. A typo in the class
name, or a class that does not derive from ``nnunet_core.Trainer``, would fail every fold job, so
the workflow's config check and ``nnunet-core train`` read the file's syntax tree first:

* the class must be defined in the file (else one line with the close matches, via difflib);
* its bases must reach our ``Trainer``: a base named ``Trainer`` (or upstream's
  ``nnUNetTrainer``) imported from ``nnunet_core``, or another class of the same file (or of our
  package) whose bases do.

What cannot be decided without running code is accepted, never refused: a base imported from
another package, a base computed by a call, a class name that the file also assigns or imports.
The import in the job still checks those (``trainer.lookup.resolve_trainer``).
"""

from __future__ import annotations

import ast
import builtins
import difflib
import enum
from dataclasses import dataclass, field
from pathlib import Path

from nnunet_core.errors import ConfigurationError, UserCodeError
from nnunet_core.extension.trainer_code import (
    FOUND_BY_MODULE,
    TrainerCode,
    module_file,
)

OUR_PACKAGE = "nnunet_core"
TRAINER_NAMES = ("Trainer", "nnUNetTrainer")  # what a user's base class is called
MAX_DEPTH = 8  # classes of our own package followed through their files, at most this deep


class Verdict(enum.Enum):
    TRAINER = "trainer"
    NOT_TRAINER = "not a trainer"
    UNKNOWN = "unknown"  # would need running code: accepted


def _combine(verdicts: list[Verdict]) -> Verdict:
    """Any path to Trainer wins; an undecidable one is accepted; else no Trainer."""
    if Verdict.TRAINER in verdicts:
        return Verdict.TRAINER
    if Verdict.UNKNOWN in verdicts:
        return Verdict.UNKNOWN
    return Verdict.NOT_TRAINER


@dataclass
class ModuleNames:
    """What a module binds at its top level (inside ``if``/``try``/``with`` blocks too)."""

    module: str | None  # dotted name where known (our package's files), else None
    classes: dict[str, list[ast.ClassDef]] = field(default_factory=dict)
    imported_from: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)  # `import a.b as x`: x -> a.b
    star_modules: list[str | None] = field(default_factory=list)
    other: set[str] = field(default_factory=set)  # assigned, defs: not decidable

    @classmethod
    def of(cls, tree: ast.Module, module: str | None) -> ModuleNames:
        names = cls(module)
        names._collect(tree.body)
        return names

    def _collect(self, body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.modules[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        self.modules[root] = root
            elif isinstance(node, ast.ImportFrom):
                source = node.module if node.level == 0 else None  # relative: not followed
                for alias in node.names:
                    if alias.name == "*":
                        self.star_modules.append(source)
                    else:
                        self.imported_from[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.other.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    self.other.update(_bound_names(target))
            for block in ("body", "orelse", "finalbody"):
                if isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
                    self._collect(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                self._collect(handler.body)


def _bound_names(target: ast.expr) -> list[str]:
    """Names an assignment binds (``x``, ``a, b``); not ``X.attr`` or ``x[i]``, which rebind
    nothing."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in _bound_names(element)]
    return []


def _ours(module: str | None) -> bool:
    return module is not None and (module == OUR_PACKAGE or module.startswith(OUR_PACKAGE + "."))


class _Resolver:
    """Decides whether a class reaches our Trainer, following only files it may read safely:
    the user's file and our own package's (never another package's: its import may differ in
    the job, and refusing on a guess would be worse than the import's own check)."""

    def __init__(self) -> None:
        self._ours: dict[str, ModuleNames | None] = {}

    def class_verdict(self, names: ModuleNames, class_name: str, depth: int = 0) -> Verdict:
        if depth > MAX_DEPTH or class_name in names.other or class_name in names.imported_from:
            return Verdict.UNKNOWN  # rebound, or re-exported: cannot tell without running
        if _ours(names.module) and class_name in TRAINER_NAMES:
            return Verdict.TRAINER  # our Trainer's own definition
        verdicts = [
            _combine([self.base_verdict(names, base, depth + 1) for base in node.bases])
            for node in names.classes.get(class_name, [])
        ]
        return _combine(verdicts) if verdicts else Verdict.UNKNOWN

    def base_verdict(self, names: ModuleNames, base: ast.expr, depth: int) -> Verdict:
        if isinstance(base, ast.Name):
            return self._name_verdict(names, base.id, depth)
        dotted = _dotted(base)
        if dotted is None:
            return Verdict.UNKNOWN  # a call, a subscript: computed at run time
        root, _, rest = dotted.partition(".")
        if root not in names.modules or not rest:
            return Verdict.UNKNOWN
        module, _, attribute = f"{names.modules[root]}.{rest}".rpartition(".")
        return self._imported_verdict(module, attribute, depth)

    def _name_verdict(self, names: ModuleNames, name: str, depth: int) -> Verdict:
        if name in names.classes:
            return self.class_verdict(names, name, depth)
        if name in names.imported_from:
            module, original = names.imported_from[name]
            return self._imported_verdict(module, original, depth)
        if name in names.other or name in names.modules:
            return Verdict.UNKNOWN
        for module in names.star_modules:
            if not _ours(module):
                return Verdict.UNKNOWN  # `from elsewhere import *` may bind it
            if name in TRAINER_NAMES:
                return Verdict.TRAINER
        if hasattr(builtins, name):
            return Verdict.NOT_TRAINER  # object, dict, Exception, ...
        return Verdict.UNKNOWN  # unbound here: the import in the job says so

    def _imported_verdict(self, module: str | None, name: str, depth: int) -> Verdict:
        if not _ours(module):
            return Verdict.UNKNOWN
        if name in TRAINER_NAMES:
            return Verdict.TRAINER
        assert module is not None
        names = self._our_module(module)
        if names is None or name not in names.classes:
            return Verdict.UNKNOWN
        return self.class_verdict(names, name, depth + 1)

    def _our_module(self, module: str) -> ModuleNames | None:
        if module not in self._ours:
            file = module_file(module)
            tree = None
            if file is not None:
                try:
                    tree = ast.parse(file.read_bytes(), filename=str(file))
                except (OSError, SyntaxError, ValueError):
                    tree = None
            self._ours[module] = None if tree is None else ModuleNames.of(tree, module)
        return self._ours[module]


def _dotted(node: ast.expr) -> str | None:
    """``a.b.C`` of an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def source_of(code: TrainerCode) -> Path | None:
    """The file to read: the named file, the ext folder's file, or a module's file when the
    import system finds one without running anything (None: nothing to read, not refused)."""
    if code.file is not None:
        return code.file
    if code.found_by == FOUND_BY_MODULE and code.module is not None:
        return module_file(code.module)
    return None


def check_trainer_source(code: TrainerCode) -> None:
    """Refuse, in one line, a trainer whose class the file does not define or whose bases do not
    reach ``nnunet_core.Trainer``; a syntax error is one line too (``UserCodeError``)."""
    file = source_of(code)
    if file is None:
        return
    try:
        tree = ast.parse(file.read_bytes(), filename=str(file))
    except OSError as exc:
        msg = f"trainer {code.name!r}: {file}: cannot be read ({exc.strerror or exc})"
        raise ConfigurationError(msg) from None
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        detail = getattr(exc, "msg", None) or str(exc)
        msg = f"trainer {code.name!r}: {file}:{line}: {type(exc).__name__}: {detail}"
        raise UserCodeError(msg) from None
    names = ModuleNames.of(tree, code.module if code.found_by == FOUND_BY_MODULE else None)
    if code.class_name not in names.classes:
        if code.class_name in names.other or code.class_name in names.imported_from:
            return  # bound some other way: the import in the job checks it
        raise UserCodeError(_missing_class(code, file, names))
    verdict = _Resolver().class_verdict(names, code.class_name)
    if verdict is Verdict.NOT_TRAINER:
        node = names.classes[code.class_name][-1]
        bases = ", ".join(ast.unparse(base) for base in node.bases) or "none"
        msg = (
            f"trainer {code.name!r}: {file}:{node.lineno}: class {code.class_name} is no "
            f"nnunet_core.Trainer (its bases: {bases}); derive it from "
            "`from nnunet_core import Trainer`"
        )
        raise UserCodeError(msg)


def _missing_class(code: TrainerCode, file: Path, names: ModuleNames) -> str:
    """``defines no class X (did you mean Y?; its classes: Y at line 4)``."""
    listed = [(name, nodes[0].lineno) for name, nodes in names.classes.items()]
    classes = ", ".join(f"{name} at line {line}" for name, line in listed) or "none"
    close = difflib.get_close_matches(code.class_name, [name for name, _ in listed], n=3)
    hint = f"did you mean {' or '.join(close)}?; " if close else ""
    return (
        f"trainer {code.name!r}: {file}:1: defines no class {code.class_name} "
        f"({hint}its classes: {classes})"
    )
