"""The floor workloads of ``workloads.py`` (``floor_metadata``, ``floor_values``; see its
docstring): what the answers cost with no reader at all, only the bytes and the framing, in a
plain loop. Stdlib only at import time."""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import zlib

from checksums import meta_checksum
from process_info import env_info, now, peak_rss_mib, rss_mib


def _json_loads():
    try:
        import orjson

        return orjson.loads, "orjson"
    except ImportError:
        return json.loads, "json"


def _floor_index(trial_path: str, loads) -> list[tuple[int, str, list[tuple[str, int, int]]]]:
    """(step, event file, [(name, start, length)]) of every index file, by step."""
    root = os.path.join(trial_path, "index")
    found = []
    for folder in sorted(os.scandir(root), key=lambda e: e.name):
        for entry in os.scandir(folder.path):
            if not entry.name.endswith(".json"):
                continue
            with open(entry.path, "rb") as f:
                doc = loads(f.read())
            step = int(entry.name.split("_", 1)[0])
            rows = [(t["tensorname"], t["start_idx"], t["length"]) for t in doc["tensor_payload"]]
            found.append((step, doc["meta"]["event_file_name"], rows))
    found.sort(key=lambda item: item[0])
    return found


def _masked_crc32c(data: bytes) -> int:
    import google_crc32c  # ours' venv; the smdebug venv has crc32c through its own deps

    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def run_floor(trial_path: str, workload: str) -> dict:
    """The floor workloads (see the module docstring); the same output fields as ``run``."""
    import struct

    phases: dict[str, float] = {}
    t = now()
    import numpy

    loads, parser = _json_loads()
    phases["import"] = now() - t
    rss_after_import = rss_mib()
    # A floor, not a reader: the cyclic collector's passes over the parsed JSON are left out
    # (our reader pauses it while it loads index files, too).
    gc.disable()
    out: dict = {
        "impl": "floor",
        "workload": workload,
        "trial": trial_path,
        "storage": "local",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "json_parser": parser,
    }
    t = now()
    index = _floor_index(trial_path, loads)
    phases["index"] = now() - t
    steps = [step for step, _, _ in index]
    names = sorted({name for _, _, rows in index for name, _, _ in rows})
    phases["index_and_names"] = now() - t
    out["meta_checksum"] = meta_checksum(steps, names)
    crc = 0
    n_values = 0
    if workload == "floor_metadata":
        headline = phases["index_and_names"]
        out["checksum"] = out["meta_checksum"]
    else:
        header = struct.Struct("<QI")
        footer = struct.pack("<I", _masked_crc32c(b"0x12345678"))
        length_crcs: dict[int, int] = {}
        frombuffer, uint8 = numpy.frombuffer, numpy.uint8
        plan = [(event, sorted(rows)) for _, event, rows in index]
        for p in (1, 2):
            t = now()
            for event, rows in plan:
                with open(os.path.join(trial_path, event), "rb") as f:
                    data = f.read()
                for _, start, length in rows:
                    n, length_crc = header.unpack_from(data, start)
                    expected = length_crcs.get(n)
                    if expected is None:
                        expected = length_crcs[n] = _masked_crc32c(struct.pack("<Q", n))
                    end = start + length
                    if n + 16 != length or length_crc != expected or data[end - 4 : end] != footer:
                        raise SystemExit(f"bad record at {event}:{start}")
                    frombuffer(data, uint8, n, start + 12)
            phases[f"pass{p}"] = now() - t
        phases["reads"] = phases["pass1"] + phases["pass2"]
        headline = phases["reads"]
        for event, rows in plan:  # untimed: what was framed, to compare runs of the floor
            with open(os.path.join(trial_path, event), "rb") as f:
                data = f.read()
            for _, start, length in rows:
                crc = zlib.crc32(memoryview(data)[start + 12 : start + length - 4], crc)
                n_values += 1
        out["checksum"] = f"crc32={crc:08x};n={n_values}"
    out["n_steps"] = len(steps)
    out["n_tensors"] = len(names)
    out["values_read"] = 2 * n_values
    gc.enable()
    out["phases"] = {k: round(v, 4) for k, v in phases.items()}
    out["seconds"] = round(headline, 4)
    not_in_total = ("import", "index_and_names", "pass1", "pass2")
    out["total_s"] = round(sum(v for k, v in phases.items() if k not in not_in_total), 4)
    out["peak_rss_mib"] = peak_rss_mib()
    out["rss_after_import_mib"] = rss_after_import
    out["env"] = dict(env_info(), impl="floor", executable=sys.executable)
    return out
