"""bench/results.json: read, written atomically, and keyed ``storage/workload/impl``."""

from __future__ import annotations

import json
import os
from typing import Any


def load_results(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, dict) and isinstance(data.get("entries"), dict):
            return data
    except (OSError, ValueError):
        pass
    return {"entries": {}}


def save_results(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def entry_key(storage: str, workload: str, impl: str) -> str:
    return f"{storage}/{workload}/{impl}"
