"""Find a rule class and build it from string parameters, as SageMaker's evaluator does.

* A built-in rule is found by name, case-insensitively, among the built-ins the caller hands
  in (``rules_builtin.registry``, handed by ``container/`` through the evaluation).
* A user's rule is the class named ``rule_to_invoke`` in the code at ``source_s3_uri``: an S3
  ``.py`` object, an S3 prefix (the whole tree is downloaded, and the module that defines the
  class is imported), a local file or folder, or a ``file://`` URL
  (``evaluator.rules.rule_source`` brings it onto disk). Before the user's code is imported,
  ``smdebug.*`` names are pointed at this package (``evaluator.compat.activate``).
* Constructor arguments are bound from the signature, every value a string as SageMaker sends
  them. A parameter the constructor does not take (``evaluator.rules.parameters``), a missing
  required argument, a constructor that raises, a file that does not import: each is a
  ``ConfigurationError`` naming what to fix.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from evaluator import compat
from evaluator.config import RESERVED_KEYS
from evaluator.errors import ConfigurationError, StopRequested
from evaluator.redaction import redact_parameters, scrub, secret_values
from evaluator.rules.parameters import check_parameters
from evaluator.rules.rule_source import fetch_source, remove_stale_source_folders, source_folder

__all__ = [
    "BuiltinRules",
    "build_rule",
    "fetch_source",
    "find_rule_class",
    "load_rule_class",
    "remove_stale_source_folders",
    "source_folder",
]


# ------------------------------------------------------------------------------ finding classes


class BuiltinRules(Protocol):
    """Where built-in rules are found by name (``rules_builtin.registry`` is one)."""

    def lookup(self, name: str) -> type | None: ...

    def names(self) -> list[str]: ...


def load_rule_class(
    name: str, source: str | None, *, workdir: Path, builtins: BuiltinRules | None = None
) -> type:
    """The class named ``name``: from ``builtins`` when ``source`` is None, else from the
    user's code. The framework knows no particular rule: the caller hands the built-ins in."""
    if not source:
        return _builtin(name, builtins)
    root = fetch_source(source, workdir=workdir)
    return find_rule_class(name, root, source=source)


def _builtin(name: str, builtins: BuiltinRules | None) -> type:
    found = builtins.lookup(name) if builtins is not None else None
    if found is not None:
        return found
    known = builtins.names() if builtins is not None else []
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    listed = f" Built-in rules: {', '.join(known)}." if known else ""
    raise ConfigurationError(
        f"unknown built-in rule {name!r} (rule_to_invoke).{hint}{listed} For your own rule, set "
        "source_s3_uri to the .py file or folder that defines the class."
    )


def find_rule_class(name: str, root: Path, *, source: str) -> type:
    """Import the module under ``root`` that defines ``class <name>`` and return the class."""
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    pattern = re.compile(rf"^\s*class\s+{re.escape(name)}\b", re.M)
    defining = [f for f in files if pattern.search(_read_text(f))]
    if not defining:
        raise ConfigurationError(
            f"no class {name!r} (rule_to_invoke) in {source}: looked in "
            f"{len(files)} .py file(s); check the class name and its spelling"
        )
    compat.activate()
    module = _import(defining[0], base=root if root.is_dir() else root.parent, source=source)
    found = getattr(module, name, None)
    if not inspect.isclass(found):
        raise ConfigurationError(f"{name!r} in {source} is not a class")
    _check_rule_class(found, source)
    return found


def _check_rule_class(cls: type, source: str) -> None:
    if not callable(getattr(cls, "invoke", None)):
        raise ConfigurationError(
            f"class {cls.__name__} in {source} is not a rule: subclass smdebug.rules.Rule "
            "(from smdebug.rules import Rule) and implement invoke_at_step(self, step)"
        )
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ()))) or "invoke_at_step"
        raise ConfigurationError(
            f"rule class {cls.__name__} in {source} does not implement {missing}(self, step)"
        )


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ConfigurationError(f"cannot read rule file {path}: {e.strerror or e}") from e


def _import(path: Path, *, base: Path, source: str) -> ModuleType:
    """Import ``path``; its folder tree (``base``) is importable so the user's helpers are."""
    for folder in {str(base), str(path.parent)}:
        if folder not in sys.path:
            sys.path.insert(0, folder)
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    module_name = f"user_rule_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"cannot import rule file {path} from {source}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # the user's code: report anything it raises on import,
        del sys.modules[module_name]  # sys.exit() and KeyboardInterrupt included
        if isinstance(e, StopRequested):
            raise  # our stop signal, not the rule's doing
        where = _user_frames(e, path)
        raise ConfigurationError(
            f"rule file {path.name} from {source} failed to import: {type(e).__name__}: {e}{where}"
        ) from e
    return module


def _user_frames(error: BaseException, path: Path) -> str:
    if isinstance(error, SyntaxError):
        return ""  # its message already names the file and line
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(path)]
    return f" (line {frames[-1].lineno})" if frames else ""


# ------------------------------------------------------------------------------ building rules


def build_rule(
    cls: type,
    base_trial: Any,
    parameters: Mapping[str, str],
    *,
    other_trials: Sequence[Any] = (),
    action_json: str | None = None,
    fallback: Mapping[str, str] | None = None,
) -> Any:
    """Instantiate ``cls(base_trial, ...)`` with the parameters its signature names.

    Values stay strings (SageMaker sends only strings; rules parse them). ``other_trials`` and
    ``action_str`` are passed only when the constructor accepts them. A key the constructor
    does not take (by name, or through ``**kwargs``) is a ``ConfigurationError``. ``fallback``
    (lower-case environment variables) can fill a named argument that ``parameters`` lacks,
    nothing more, and is never an error.
    """
    check_parameters(cls, parameters)
    kwargs = _bind(
        cls, parameters, other_trials=other_trials, action_json=action_json, fallback=fallback or {}
    )
    try:
        return cls(base_trial, **kwargs)
    except (ConfigurationError, StopRequested):
        raise  # already says what to fix (a rule's parameter check, a bad action_json)
    except BaseException as e:  # whatever the constructor raised, KeyboardInterrupt included
        # Secrets masked (evaluator.redaction): in the list, and where the rule's own message
        # quotes them. The message reaches the logs, the result file and StatusDetails.
        given = {k: v for k, v in kwargs.items() if isinstance(v, str) and k != "action_str"}
        shown = ", ".join(f"{k}={v!r}" for k, v in redact_parameters(given).items()) or "none"
        said = scrub(str(e), secret_values({**parameters, **given}))
        raise ConfigurationError(
            f"rule {cls.__name__} rejected its parameters: {type(e).__name__}: {said}"
            f"{_constructor_frame(e, cls)} (parameters given: {shown}); check the values in "
            "RuleParameters"
        ) from e


def _constructor_frame(error: BaseException, cls: type) -> str:
    """`` (file.py, line N)``: the innermost frame of the raise in the rule's own file."""
    try:
        source = inspect.getsourcefile(cls)
    except TypeError:
        return ""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == source]
    return f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno})" if frames else ""


def _bind(
    cls: type,
    parameters: Mapping[str, str],
    *,
    other_trials: Sequence[Any],
    action_json: str | None,
    fallback: Mapping[str, str],
) -> dict[str, Any]:
    try:
        signature = inspect.signature(cls.__init__)  # type: ignore[misc]
    except (TypeError, ValueError):
        return {}
    params = list(signature.parameters.values())[2:]  # self, base_trial
    kwargs: dict[str, Any] = {}
    takes_kwargs = False
    for p in params:
        if p.kind == p.VAR_KEYWORD:
            takes_kwargs = True
        elif p.kind == p.VAR_POSITIONAL:
            continue
        elif p.name == "other_trials":
            if other_trials or p.default is p.empty:
                kwargs["other_trials"] = list(other_trials)
        elif p.name == "action_str":
            kwargs["action_str"] = action_json or ""
        elif p.name in parameters:
            kwargs[p.name] = parameters[p.name]
        elif p.name in fallback:
            kwargs[p.name] = fallback[p.name]
        elif p.default is p.empty:
            raise ConfigurationError(
                f"rule {cls.__name__} needs parameter {p.name!r}: add it to RuleParameters "
                f"(e.g. --{p.name} VALUE or environment variable {p.name})"
            )
    if takes_kwargs:
        kwargs.update(
            {k: v for k, v in parameters.items() if k not in kwargs and k not in RESERVED_KEYS}
        )
    return kwargs
