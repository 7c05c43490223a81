"""Where a user's trainer class lives, and loading it, with one-line errors.

A trainer is named (``-tr``, ``training.trainer``) in one of three forms besides our built-in
names: ``package.module:ClassName`` (importable), ``/path/to/file.py:ClassName``, or a bare class
name defined in a ``.py`` file under one of the folders of ``nnUNet_extTrainer`` (os.pathsep
separated, upstream's variable). Parsing a name never imports anything (the workflow's config
check calls it); ``load_class`` imports the code. It lives below inference because ``predict``
loads a model folder's recorded copy of the trainer to rebuild its network.

Every failure is one line naming the trainer, the file and the line: a ConfigurationError where
the name points nowhere (file or module missing), a UserCodeError (exit 3, never retried) where
the code is there but fails (syntax error, a failing import, no such class).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from nnunet_core.errors import ConfigurationError, UserCodeError

EXT_TRAINER_ENV = "nnUNet_extTrainer"
FOUND_BY_MODULE = "module"
FOUND_BY_FILE = "file"
FOUND_BY_EXT = EXT_TRAINER_ENV
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_MODULE_RE = re.compile(rf"^{_IDENTIFIER}(\.{_IDENTIFIER})*$")
_CLASS_RE = re.compile(rf"^{_IDENTIFIER}$")
_LOADED_PREFIX = "nnunet_core_user_trainer_"  # sys.modules names of files loaded by path


@dataclass(frozen=True)
class TrainerCode:
    """A user trainer's class name and where its code is (module or file)."""

    name: str  # as the user gave it
    class_name: str  # names the results folder, as upstream's
    found_by: str  # FOUND_BY_MODULE, FOUND_BY_FILE or FOUND_BY_EXT
    module: str | None = None  # the dotted module (FOUND_BY_MODULE)
    file: Path | None = None  # the file (FOUND_BY_FILE, FOUND_BY_EXT)
    kind: str = "trainer"  # what the code is, for messages: "trainer" or "planner"


def is_user_trainer_name(name: str) -> bool:
    """A ``module:Class`` or ``file.py:Class`` name (a bare name may be built in or external)."""
    return ":" in name


def trainer_class_name(name: str) -> str:
    """The class name, which names the results folder: the part after the last colon."""
    return name.rsplit(":", 1)[-1]


def parse_trainer_code(
    name: str, *, kind: str = "trainer", env: str = EXT_TRAINER_ENV
) -> TrainerCode:
    """Where ``module:Class``, ``file.py:Class`` or (external, in the folders of ``env``)
    ``Class`` is; nothing imported. ``kind`` names the code in messages (a user's planner is
    named as a trainer is: ``planning.user_planner``)."""
    if not is_user_trainer_name(name):
        file = find_in_ext_folders(name, env)
        if file is None:
            folders = os.environ.get(env, "")
            where = f"{env}={folders}" if folders else f"{env} is unset"
            msg = f"{kind} {name!r}: no file defines class {name} ({where})"
            raise ConfigurationError(msg)
        return TrainerCode(name, name, env, file=file, kind=kind)
    location, class_name = name.rsplit(":", 1)
    if not _CLASS_RE.match(class_name):
        msg = f"{kind} {name!r}: {class_name!r} after the colon is not a class name"
        raise ConfigurationError(msg)
    if location.endswith(".py") or os.sep in location or "/" in location:
        file = Path(location).expanduser().absolute()
        if not file.is_file():
            msg = f"{kind} {name!r}: {file}: file not found"
            raise ConfigurationError(msg)
        return TrainerCode(name, class_name, FOUND_BY_FILE, file=file, kind=kind)
    if not _MODULE_RE.match(location):
        msg = f"{kind} {name!r}: {location!r} is neither a module (a.b.c) nor a .py file"
        raise ConfigurationError(msg)
    return TrainerCode(name, class_name, FOUND_BY_MODULE, module=location, kind=kind)


def trainer_source_path(code: TrainerCode) -> Path:
    """The ``.py`` file that holds the trainer's class (a module's file found without running
    it); a one-line ConfigurationError when there is none."""
    if code.file is not None:
        return code.file
    assert code.module is not None
    file = module_file(code.module)
    if file is None:
        msg = f"{code.kind} {code.name!r}: no .py file of module {code.module!r} found on sys.path"
        raise ConfigurationError(msg)
    return file


def module_file(module: str) -> Path | None:
    """The source file of a dotted module (a package's: its ``__init__.py``), asked level by level
    of the import system's finders, which locate code without executing any of it."""
    spec, path = None, None
    for depth, _ in enumerate(parts := module.split(".")):
        name = ".".join(parts[: depth + 1])
        spec = _find_spec(name, path)
        if spec is None:
            return None
        locations = spec.submodule_search_locations
        path = list(locations) if locations is not None else None
        if path is None and depth < len(parts) - 1:
            return None  # a plain module has no submodules
    origin = spec.origin if spec is not None and spec.has_location else None
    return Path(origin).absolute() if origin and origin.endswith(".py") else None


def _find_spec(name: str, path: list[str] | None) -> importlib.machinery.ModuleSpec | None:
    loaded = sys.modules.get(name)
    if loaded is not None:
        return getattr(loaded, "__spec__", None)
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, path) if find is not None else None
        if spec is not None:
            return spec
    return None


def ext_folders(env: str = EXT_TRAINER_ENV) -> list[Path]:
    """The folders listed in ``nnUNet_extTrainer`` (or the variable ``env``)."""
    value = os.environ.get(env, "")
    return [Path(p).expanduser() for p in value.split(os.pathsep) if p.strip()]


def find_in_ext_folders(class_name: str, env: str = EXT_TRAINER_ENV) -> Path | None:
    """The first ``.py`` file (folders in order, files sorted) whose text defines the class;
    found by reading, so that no unrelated module is imported."""
    pattern = re.compile(rf"^class\s+{re.escape(class_name)}\b", re.MULTILINE)
    for folder in ext_folders(env):
        for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
            try:
                if pattern.search(path.read_text(encoding="utf-8", errors="replace")):
                    return path.absolute()
            except OSError:
                continue
    return None


def load_class(code: TrainerCode, file: Path | None = None, *, sha256: str | None = None) -> type:
    """Import the trainer's code (``file``: a recorded copy instead) and return its class.

    ``sha256``: the file runs only if its bytes have this digest (a model's carried code,
    checked by ``extension.consent``); the bytes checked are the bytes executed.
    """
    file = file or code.file
    if file is not None:
        module = load_file(code.name, file, sha256=sha256, kind=code.kind)
        where = str(file)
    else:
        module = _import_module(code)
        where = str(getattr(module, "__file__", code.module))
    found = getattr(module, code.class_name, None)
    if not isinstance(found, type):
        classes = ", ".join(f"{n} at line {line}" for n, line in _classes_in(Path(where)))
        msg = (
            f"{code.kind} {code.name!r}: {where}:1: defines no class {code.class_name} "
            f"(its classes: {classes or 'none'})"
        )
        raise UserCodeError(msg)
    return found


def _classes_in(file: Path) -> list[tuple[str, int]]:
    """The top-level classes a Python file defines, with their lines (none if unreadable)."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    return [(n.name, n.lineno) for n in tree.body if isinstance(n, ast.ClassDef)]


def load_file(
    name: str, file: Path, *, sha256: str | None = None, kind: str = "trainer"
) -> ModuleType:
    """Execute ``file`` as a module registered under a name of its own (so it pickles into the
    forked data workers); a failure is one line with the file and line. With ``sha256`` the file
    is read once, its digest checked, and those bytes executed (no window in which the file could
    change between the check and the run)."""
    if not file.is_file():
        msg = f"{kind} {name!r}: {file}: file not found"
        raise ConfigurationError(msg)
    checked = None if sha256 is None else _checked_bytes(f"{kind} {name!r}", file, sha256)
    digest = hashlib.sha256(str(file).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", file.stem)
    module_name = f"{_LOADED_PREFIX}{stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        msg = f"{kind} {name!r}: {file}: cannot be loaded as Python"
        raise ConfigurationError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # before exec: dataclasses and pickling look it up
    try:
        if checked is None:
            spec.loader.exec_module(module)
        else:
            exec(compile(checked, str(file), "exec"), module.__dict__)  # noqa: S102
    except Exception as exc:
        del sys.modules[module_name]
        raise _code_error(f"{kind} {name!r}", exc, file) from None
    return module


def _checked_bytes(named: str, file: Path, sha256: str) -> bytes:
    """The bytes of ``file`` if their sha256 is ``sha256``; else a one-line refusal."""
    data = file.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256.lower():
        msg = f"{named}: {file} has sha256 {actual}, not the checked {sha256}; not run"
        raise ConfigurationError(msg)
    return data


def _import_module(code: TrainerCode) -> ModuleType:
    assert code.module is not None
    try:
        return importlib.import_module(code.module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and code.module.startswith(exc.name):
            named = f"{code.kind} {code.name!r}"
            msg = f"{named}: no module {exc.name!r} (install it or add to PYTHONPATH)"
            raise ConfigurationError(msg) from None
        raise _code_error(f"{code.kind} {code.name!r}", exc, None) from None
    except Exception as exc:
        raise _code_error(f"{code.kind} {code.name!r}", exc, None) from None


def _code_error(named: str, exc: BaseException, file: Path | None) -> UserCodeError:
    """``trainer 'x': <file>:<line>: <ExceptionType>: <message>`` for a failing import."""
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename}:{exc.lineno}"
        return UserCodeError(f"{named}: {where}: SyntaxError: {exc.msg}")
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if file is not None and Path(f.filename) == file]
    outside = [f for f in frames if "importlib" not in f.filename]
    frame = (own or outside or frames or [None])[-1]
    where = f"{frame.filename}:{frame.lineno}" if frame is not None else str(file)
    detail = str(exc).splitlines()[0] if str(exc) else ""
    return UserCodeError(f"{named}: {where}: {type(exc).__name__}: {detail}")


def class_location(cls: type, code: TrainerCode) -> str:
    """``file:line`` where ``cls`` is defined (the code's file or module where unknown)."""
    try:
        return f"{inspect.getsourcefile(cls)}:{inspect.getsourcelines(cls)[1]}"
    except (OSError, TypeError):
        return f"{code.file or code.module}:1"


def source_file(cls: type) -> Path | None:
    """The file that defines ``cls`` (None for a class without one)."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    return Path(path) if path else None
