"""Find a rule class and build it from string parameters, as SageMaker's evaluator does.

* A built-in rule is found by name, case-insensitively, among the built-ins the caller hands
  in (``rules_builtin.registry``, handed by ``container/`` through the evaluation).
* A user's rule is the class named ``rule_to_invoke`` in the code at ``source_s3_uri``: an S3
  ``.py`` object, an S3 prefix (the whole tree is downloaded, and the module that defines the
  class is imported), a local file or folder, or a ``file://`` URL. Before the user's code is
  imported, ``smdebug.*`` names are pointed at this package (``evaluator.compat.activate``).
* Constructor arguments are bound from the signature, every value a string as SageMaker sends
  them. A parameter the constructor does not take (``evaluator.rules.parameters``), a missing
  required argument, a constructor that raises, a file that does not import: each is a
  ``ConfigurationError`` naming what to fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import hashlib
import importlib.util
import inspect
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import IO, Any, Protocol

try:
    import fcntl
except ImportError:  # not POSIX: stale folders without a lock file are still removed
    fcntl = None  # type: ignore[assignment]

from evaluator import compat
from evaluator.config import RESERVED_KEYS
from evaluator.errors import ConfigurationError, StopRequested, StorageError
from evaluator.redaction import redact_parameters, scrub, secret_values
from evaluator.rules.parameters import check_parameters
from evaluator.storage import open_storage
from evaluator.storage.schemes import is_remote, local_path

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


def fetch_source(source: str, *, workdir: Path) -> Path:
    """A local file or folder holding the user's rule code (downloaded from S3 if needed)."""
    if is_remote(source):
        return _download(source, workdir)
    path = Path(local_path(source))
    if not path.exists():
        raise ConfigurationError(
            f"rule source {source!r} (source_s3_uri) does not exist: give an s3:// URI, a "
            "file:// URL, or a path to a .py file or folder visible to the evaluator"
        )
    return path


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


def _download(uri: str, workdir: Path) -> Path:
    """Copy an S3 object or prefix into ``workdir``; the path of the copy.

    Every key must land inside the copy: a key with a ``..`` segment, an absolute one (``//``
    after the prefix) or one that would otherwise leave the folder is refused before anything
    is written. Zero-byte folder markers (keys ending in ``/``, as the S3 console makes) are
    skipped. A file the file system will not take (a name too long, no permission, a full
    disk) is a ``ConfigurationError`` naming the key and the reason.
    """
    # A .py object is read from its folder; a prefix is copied whole (helpers import).
    folder, _, name = uri.rpartition("/") if uri.endswith(".py") else (uri, "", "")
    target = workdir / "rule_source"

    async def copy() -> Path:
        storage = open_storage(folder + "/" if name else folder)
        try:
            if name:
                keys = [name]
            else:
                listed = [(o.key, o.size) async for o in storage.list_after("")]
                keys = [key for key, size in listed if not _folder_marker(key, size, uri)]
            if not keys:
                raise ConfigurationError(f"no files under rule source {uri} (source_s3_uri)")
            places = [(key, _inside(target, key, uri)) for key in keys]  # all checked first
            for key, dest in places:
                data = await storage.read(key)
                try:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(data)
                except OSError as e:
                    raise ConfigurationError(
                        f"cannot save rule source file {key!r} from {uri} (source_s3_uri): "
                        f"{e.strerror or e}"
                    ) from e
            return target / name if name else target
        finally:
            await storage.aclose()

    try:
        return asyncio.run(copy())
    except StorageError as e:
        raise ConfigurationError(f"cannot fetch rule source {uri} (source_s3_uri): {e}") from e


def _folder_marker(key: str, size: int, uri: str) -> bool:
    """True for an S3 console folder marker (``rules/``, zero bytes): nothing to copy. The
    prefix's own marker is listed as the empty key."""
    if key and not key.endswith("/"):
        return False
    if size:
        raise ConfigurationError(
            f"rule source key {key!r} under {uri} (source_s3_uri) ends in '/' but holds "
            f"{size} bytes: a file name cannot end in '/'"
        )
    return True


def _inside(target: Path, key: str, uri: str) -> Path:
    """Where ``key`` is written under ``target``; a ``ConfigurationError`` when it would be
    anywhere else (``..`` segments, an absolute path, a name the platform cannot hold)."""
    refused = ConfigurationError(
        f"rule source key {key!r} under {uri} (source_s3_uri) is refused: it would be written "
        "outside the download folder (a '..' segment or an absolute path); rename the object"
    )
    parts = key.replace("\\", "/").split("/")
    if not key or key.startswith("/") or any(p == ".." for p in parts) or "\0" in key:
        raise refused
    base = os.path.normpath(os.path.abspath(target))
    dest = os.path.normpath(os.path.join(base, key))
    if os.path.isabs(key) or os.path.commonpath([base, dest]) != base or dest == base:
        raise refused
    return Path(dest)


# ------------------------------------------------------------------------------ the work folder

SOURCE_FOLDER_PREFIX = "rule-source-"
_LOCK_NAME = ".in-use"


@contextlib.contextmanager
def source_folder(scratch: str | None) -> Iterator[Path]:
    """A fresh ``rule-source-*`` folder under ``scratch`` (the system's temp folder if None)
    for downloaded rule code, removed when the block ends.

    While in use the folder holds a file locked by this process; the lock goes when the
    process does, however it ends. On entry, ``rule-source-*`` folders in ``scratch`` whose
    lock is free (left by a killed earlier attempt) are removed; nothing else is touched.
    """
    if scratch is not None:
        remove_stale_source_folders(Path(scratch))
    with tempfile.TemporaryDirectory(
        prefix=SOURCE_FOLDER_PREFIX, dir=scratch, ignore_cleanup_errors=True
    ) as folder:
        lock = _hold_lock(Path(folder) / _LOCK_NAME)
        try:
            yield Path(folder)
        finally:
            if lock is not None:
                lock.close()


def remove_stale_source_folders(scratch: Path) -> list[Path]:
    """Remove the ``rule-source-*`` folders in ``scratch`` no running process holds; the list
    of those removed. A folder without a lock file counts as stale only when it is older than
    this process (an earlier version's leftover)."""
    removed: list[Path] = []
    try:
        candidates = sorted(scratch.glob(SOURCE_FOLDER_PREFIX + "*"))
    except OSError:
        return removed
    for folder in candidates:
        if folder.is_symlink() or not folder.is_dir() or not _stale(folder):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed


def _stale(folder: Path) -> bool:
    lock_path = folder / _LOCK_NAME
    if not lock_path.exists():
        try:
            return folder.stat().st_mtime < _PROCESS_STARTED
        except OSError:
            return False
    if fcntl is None:
        return False  # no way to tell whether its process still runs
    try:
        with open(lock_path, "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:
        return False  # held: a running evaluator's folder
    return True


def _hold_lock(path: Path) -> IO[bytes] | None:
    if fcntl is None:
        return None
    try:
        handle = open(path, "wb")  # noqa: SIM115 - held open while the folder is in use
    except OSError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


_PROCESS_STARTED = time.time()


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
