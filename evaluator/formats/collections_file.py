"""Collections files: ``collections/000000000/<worker>_collections.json``, one per worker.

::

    {"collections": {"weights": {"name": "weights", "include_regex": ["^conv.*weight"],
                                 "tensor_names": ["conv1.weight"],
                                 "reduction_config": {"save_raw_tensor": true,
                                                      "reductions": "mean,l2_norm,abs_max",
                                                      "save_shape": false},
                                 "save_config": {"TRAIN": {"save_interval": 10, "save_steps": [],
                                                           "start_step": 0, "end_step": null},
                                                 "EVAL": null, "PREDICT": null, "GLOBAL": null},
                                 "save_histogram": true}},
     "_meta": {"num_workers": 2}}

The classes keep smdebug's attribute names because users' rules read them
(``trial.collection("weights").tensor_names``). Parsing follows smdebug's
``CollectionManager.load_from_string``, except that where smdebug fails with a bare ``KeyError``
or an obscure error, ``SMDebugValueError`` says what is wrong, and a missing ``include_regex``
is ``[]`` (smdebug makes it ``False``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evaluator.errors import SMDebugValueError
from evaluator.modes import ModeKeys

__all__ = [
    "ALLOWED_NORMS",
    "ALLOWED_REDUCTIONS",
    "Collection",
    "CollectionsFile",
    "ReductionConfig",
    "SaveConfigMode",
    "parse_collections_file",
    "serialize_collections_file",
]

ALLOWED_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
ALLOWED_NORMS = ("l1", "l2")
_TOP_LEVEL_KEYS = ("collections", "_meta")


@dataclass
class ReductionConfig:
    """Which reductions a collection saves instead of (or besides) the raw tensor."""

    reductions: list[str] = field(default_factory=list)
    abs_reductions: list[str] = field(default_factory=list)
    norms: list[str] = field(default_factory=list)
    abs_norms: list[str] = field(default_factory=list)
    save_raw_tensor: bool = False
    save_shape: bool = False

    def __post_init__(self) -> None:
        for kind, names, allowed in (
            ("reductions", self.reductions, ALLOWED_REDUCTIONS),
            ("abs_reductions", self.abs_reductions, ALLOWED_REDUCTIONS),
            ("norms", self.norms, ALLOWED_NORMS),
            ("abs_norms", self.abs_norms, ALLOWED_NORMS),
        ):
            bad = [n for n in names if n not in allowed]
            if bad:
                raise SMDebugValueError(f"{kind} can only be one of {','.join(allowed)}; got {bad}")
        for flag in ("save_raw_tensor", "save_shape"):
            if not isinstance(getattr(self, flag), bool):
                raise SMDebugValueError(f"{flag}={getattr(self, flag)!r} must be a boolean")

    @property
    def reductions_string(self) -> str:
        """smdebug's comma-joined form: plain, ``X_norm``, ``abs_X``, ``abs_X_norm``."""
        return ",".join(
            [*self.reductions]
            + [f"{n}_norm" for n in self.norms]
            + [f"abs_{r}" for r in self.abs_reductions]
            + [f"abs_{n}_norm" for n in self.abs_norms]
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "save_raw_tensor": self.save_raw_tensor,
            "reductions": self.reductions_string,
            "save_shape": self.save_shape,
        }

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> ReductionConfig:
        if not isinstance(params, Mapping):
            raise SMDebugValueError(f"reduction_config must be an object, got {params!r}")
        text = params.get("reductions", "")
        if not isinstance(text, str):
            raise SMDebugValueError(f"reduction_config 'reductions' must be a string: {text!r}")
        groups: dict[str, list[str]] = {
            "reductions": [],
            "abs_reductions": [],
            "norms": [],
            "abs_norms": [],
        }
        for token in (t.strip() for t in text.split(",")):
            if token:
                kind, name = _classify_reduction(token)
                groups[kind].append(name)
        return cls(
            **groups,
            save_raw_tensor=params.get("save_raw_tensor", False),
            save_shape=params.get("save_shape", False),
        )


def _classify_reduction(token: str) -> tuple[str, str]:
    is_abs = token.startswith("abs_")
    name = token[4:] if is_abs else token
    if name.endswith("_norm"):
        return ("abs_norms" if is_abs else "norms"), name[: -len("_norm")]
    return ("abs_reductions" if is_abs else "reductions"), name


@dataclass
class SaveConfigMode:
    """When a collection is saved in one mode."""

    save_interval: int = 500
    save_steps: list[int] = field(default_factory=list)
    start_step: int = 0
    end_step: int | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "save_interval": self.save_interval,
            "save_steps": self.save_steps,
            "start_step": self.start_step,
            "end_step": self.end_step,
        }

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> SaveConfigMode:
        if not isinstance(params, Mapping):
            raise SMDebugValueError(f"save_config mode entry must be an object, got {params!r}")
        # smdebug's "x or default": 0 / [] / null all mean the default (end_step 0 means none).
        try:
            end_step = params.get("end_step")
            return cls(
                save_interval=int(params.get("save_interval") or 500),
                save_steps=[int(s) for s in params.get("save_steps") or []],
                start_step=int(params.get("start_step") or 0),
                end_step=int(end_step) if end_step else None,
            )
        except (TypeError, ValueError) as e:
            raise SMDebugValueError(f"invalid save_config entry {dict(params)!r}: {e}") from None


SaveConfigByMode = dict[ModeKeys, SaveConfigMode | None]


@dataclass
class Collection:
    """A named group of tensors, with the configuration they were saved with."""

    name: str
    include_regex: list[str] = field(default_factory=list)
    tensor_names: set[str] = field(default_factory=set)
    reduction_config: ReductionConfig | None = None
    save_config: SaveConfigByMode | None = None
    save_histogram: bool = True

    def __hash__(self) -> int:  # smdebug hashes collections by name
        return hash(self.name)

    def include(self, regex: str | list[str]) -> None:
        """Add one regex or a list of them to ``include_regex``."""
        self.include_regex.extend([regex] if isinstance(regex, str) else regex)

    def has_tensor_name(self, name: str) -> bool:
        return name in self.tensor_names

    def add_tensor_name(self, name: str) -> None:
        self.tensor_names.add(name)

    def to_json_dict(self) -> dict[str, Any]:
        """smdebug's JSON form: sorted tensor names, config objects flattened."""
        return {
            "name": self.name,
            "include_regex": self.include_regex,
            "tensor_names": sorted(self.tensor_names),
            "reduction_config": (
                self.reduction_config.to_json_dict() if self.reduction_config else None
            ),
            "save_config": _save_config_json(self.save_config),
            "save_histogram": self.save_histogram,
        }

    @classmethod
    def from_dict(cls, params: Mapping[str, Any], *, default_name: str | None = None) -> Collection:
        """Build from the JSON form; unknown keys are ignored, as in smdebug.

        ``default_name`` (the key the collection is filed under) names a collection whose
        ``name`` is missing or null.
        """
        if not isinstance(params, Mapping):
            raise SMDebugValueError(f"a collection must be an object, got {params!r}")
        name = params.get("name")
        if name is None:
            name = default_name
        if not isinstance(name, str):
            raise SMDebugValueError(f"a collection's name must be a string, got {name!r}")
        reduction = params.get("reduction_config")
        return cls(
            name=name,
            include_regex=_strings(params.get("include_regex"), name, "include_regex"),
            tensor_names=set(_strings(params.get("tensor_names"), name, "tensor_names")),
            reduction_config=None if reduction is None else ReductionConfig.from_dict(reduction),
            save_config=_parse_save_config(params.get("save_config")),
            save_histogram=params.get("save_histogram", True),
        )


def _strings(value: object, name: str, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise SMDebugValueError(f"collection {name!r}: {key} must be a list of strings, got {value!r}")


def _parse_save_config(value: object) -> SaveConfigByMode | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SMDebugValueError(f"save_config must be an object keyed by mode, got {value!r}")
    config: SaveConfigByMode = {}
    for mode_name, entry in value.items():
        try:
            mode = ModeKeys[mode_name]
        except KeyError:
            raise SMDebugValueError(f"save_config has unknown mode {mode_name!r}") from None
        config[mode] = SaveConfigMode.from_dict(entry) if entry is not None else None
    for mode in ModeKeys:  # smdebug fills the modes not given with None
        config.setdefault(mode, None)
    return config


def _save_config_json(config: SaveConfigByMode | None) -> dict[str, Any] | None:
    if config is None:
        return None
    return {mode.name: (m.to_json_dict() if m else None) for mode, m in config.items()}


@dataclass
class CollectionsFile:
    """One worker's collections file. ``num_workers`` is the job's worker count."""

    collections: dict[str, Collection]
    num_workers: int = 1


def parse_collections_file(
    data: bytes | str, *, max_bytes: int | None = None, source: str = "collections file"
) -> CollectionsFile:
    """Parse a collections file's content; one over ``max_bytes`` bytes is refused unparsed,
    the error naming ``source`` and the limit."""
    if max_bytes is not None and len(data) > max_bytes:
        raise SMDebugValueError(
            f"{source} is {len(data)} bytes, over the limit of {max_bytes} "
            "(max_collections_file_mb): refused as bad data"
        )
    document = _load_json(data)
    if any(key not in _TOP_LEVEL_KEYS for key in document):
        raise SMDebugValueError(
            "allowed params for collection manager can only be one of " + ",".join(_TOP_LEVEL_KEYS)
        )
    for key in _TOP_LEVEL_KEYS:
        if key not in document:
            raise SMDebugValueError(f"collections file has no {key!r} section")
    entries, meta = document["collections"], document["_meta"]
    if not isinstance(entries, Mapping) or not isinstance(meta, Mapping):
        raise SMDebugValueError("collections file: 'collections' and '_meta' must be objects")
    collections: dict[str, Collection] = {}
    for key, entry in entries.items():
        # Filed under its own name, as smdebug does; the outer key names a nameless one.
        collection = Collection.from_dict(entry, default_name=key)
        collections[collection.name] = collection
    return CollectionsFile(collections, _num_workers({"num_workers": 1, **meta}))


def serialize_collections_file(collections_file: CollectionsFile) -> bytes:
    """The bytes smdebug's ``CollectionManager.export`` writes."""
    document = {
        "collections": {name: c.to_json_dict() for name, c in collections_file.collections.items()},
        "_meta": {"num_workers": collections_file.num_workers},
    }
    return json.dumps(document).encode("utf-8")


def _load_json(data: bytes | str) -> dict[str, Any]:
    if not data:
        raise SMDebugValueError("collections file is empty")
    try:
        document = json.loads(data)
    except RecursionError:
        raise SMDebugValueError("collections file is nested too deeply") from None
    except ValueError as e:
        raise SMDebugValueError(f"collections file is not valid JSON: {e}") from None
    if not isinstance(document, dict):
        kind = type(document).__name__
        raise SMDebugValueError(f"collections file must hold a JSON object, got {kind}")
    return document


def _num_workers(meta: Mapping[str, Any]) -> int:
    value = meta["num_workers"]
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(value)  # smdebug accepts "3"
    except (TypeError, ValueError):
        raise SMDebugValueError(
            f"collections _meta num_workers must be an integer, got {value!r}"
        ) from None
