"""One benchmark workload, run against either trial reader through the same Trial API.

    bench/.work/venv-smdebug/bin/python bench/workloads.py --impl smdebug --trial T --workload W
    .venv/bin/python                    bench/workloads.py --impl ours    --trial T --workload W

``--impl smdebug`` imports ``smdebug.trials.create_trial`` (the real smdebug 1.0.34, from its own
venv); ``--impl ours`` imports ``evaluator.trial.create_trial`` from this checkout.  Everything
else is the same code.  ``T`` is a local trial directory or ``s3://bucket/prefix`` (for a moto
server, set ``AWS_ENDPOINT_URL`` and dummy credentials; bench/run.py --s3 does).

Workloads (the fresh process does exactly this, nothing else):

``metadata``
    create_trial, steps(), modes(), tensor_names(), workers().  Headline: the sum of those.
``values100``
    create_trial, steps() + tensor_names() ("list"), then 100 ``tensor(name).value(step)``
    reads: read i (0..99) takes step ``steps[i * len(steps) // 100]`` and tensor
    ``names[(i * 17) % len(names)]``.  Each read is timed alone, then its value is hashed
    (timed apart).  Headline: the 100 reads; create_trial is reported too.
``values_all``
    create_trial, list, then every tensor at every step (step-major, names in sorted order),
    twice: 2 x steps x tensors ``value()`` calls (200,000 on the 2000x50 trial).  Per step, the
    reads of its values are timed as one block into a list, then the list is hashed (timed
    apart); only one step's values are held at a time.  Headline: all reads; each pass (its
    reads only) is reported too.

The floors: what the same answers cost with no reader at all, only the bytes and the framing,
in a plain loop (stdlib, numpy and, when installed, orjson; ``--impl`` only picks the
interpreter).  A reader cannot beat them; the issue's target is "within 2x".

``floor_metadata``
    list ``index/`` (``os.scandir`` of its folders), read and parse every index file (orjson,
    else json), and collect the steps and the sorted tensor names.  Headline: all of it.
``floor_values``
    the index files are read and parsed first (``index`` phase, not in the headline); then the
    values_all walk, twice: per step (in order), one read of its event file, and per tensor
    (names sorted) the record framed (length, length CRC, footer checked) and one
    ``numpy.frombuffer`` over its payload.  The CRC of each distinct length is computed once,
    as a reader would cache it.  Headline: both passes; they compare directly with
    values_all's ``reads`` (and a pass with its ``pass1``/``pass2``): neither contains any
    hashing.  Its checksum (a CRC chain over the payloads, computed after the timing) does
    not equal values_all's, which hashes the decoded values.

Both floors run with the cyclic garbage collector paused, as our reader pauses it while it
loads index files.

Output: ONE JSON line on stdout (the last line; libraries may log before it) with the seconds of
each phase (``phases``), the headline seconds, the total (``total_s``: everything after the
import except the checksum, which is timed apart; for the value workloads create_trial + list +
reads), the peak RSS of the process (``ru_maxrss``), a checksum of every value read (CRC-32
chained over the raw bytes in read order, plus the dtypes/shapes seen) and a checksum of the
metadata answers, so that a runner can prove both implementations read the same numbers.  The
value workloads hash each value after its read, outside the timed reads, and time the hashing
apart: phase ``checksum_s`` (about the same for both implementations), in neither ``reads``
nor the total.
"""

from __future__ import annotations

import argparse
import collections
import gc
import hashlib
import json
import os
import platform
import resource
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
WORKLOADS = ("metadata", "values100", "values_all")
FLOOR_WORKLOADS = ("floor_metadata", "floor_values")
S3_WORKLOADS = ("metadata", "values100")


def _now() -> float:
    return time.perf_counter()


def _rss_mib() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _peak_rss_mib() -> float:
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.platform == "darwin":  # bytes there
        kib /= 1024
    return round(kib / 1024, 1)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_impl(impl: str):
    """Import create_trial of the chosen implementation; return (create_trial, version info)."""
    info: dict = {}
    if impl == "smdebug":
        import smdebug
        from smdebug.trials import create_trial

        info["impl_version"] = getattr(smdebug, "__version__", "?")
        info["impl_file"] = os.path.dirname(smdebug.__file__)
        if info["impl_version"] != "1.0.34":
            print(
                f"warning: smdebug {info['impl_version']} imported, the anchor is 1.0.34",
                file=sys.stderr,
            )
    elif impl == "ours":
        if REPO_ROOT not in sys.path:
            sys.path.insert(0, REPO_ROOT)
        import evaluator
        from evaluator.trial import create_trial

        info["impl_version"] = getattr(evaluator, "__version__", None) or _project_version()
        info["impl_file"] = os.path.dirname(evaluator.__file__)
    else:
        raise SystemExit(f"unknown --impl {impl!r}")
    return create_trial, info


def _project_version() -> str:
    try:
        import tomllib

        with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
            return tomllib.load(f)["project"]["version"]
    except Exception:  # noqa: BLE001 - informational only
        return "?"


def _env_info() -> dict:
    info = {
        "python": platform.python_version(),
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "platform": platform.platform(),
    }
    try:
        import numpy

        info["numpy"] = numpy.__version__
    except ImportError:
        info["numpy"] = None
    try:
        import google.protobuf

        info["protobuf"] = google.protobuf.__version__
        try:
            from google.protobuf.internal import api_implementation

            info["protobuf_impl"] = api_implementation.Type()
        except Exception:  # noqa: BLE001
            pass
    except ImportError:
        info["protobuf"] = None
    return info


class Checksum:
    """CRC-32 over the raw bytes (C order) of every value read, in read order, plus dtype/shape counts.

    Kept cheap (about 1-2 us a value): a C-contiguous ndarray goes straight into zlib.crc32 through
    the buffer protocol, and dtype/shape are only recorded when they change.  The value workloads
    call it outside their timed reads and time it apart (``checksum_s``).
    """

    def __init__(self) -> None:
        import numpy  # after the implementation's import, so it does not count as that import

        self._asarray = numpy.asarray
        self.crc = 0
        self.n = 0
        self.kinds: collections.Counter = collections.Counter()
        self._sig = None
        self._run = 0

    def add(self, value) -> None:
        try:
            sig = (value.dtype, value.shape)
            crc = zlib.crc32(value, self.crc)  # BufferError unless C-contiguous
        except (AttributeError, BufferError, TypeError, ValueError):
            a = self._asarray(value)
            sig = (a.dtype, a.shape)
            crc = zlib.crc32(a.tobytes(order="C"), self.crc)
        self.crc = crc
        self.n += 1
        if sig != self._sig:
            self._flush()
            self._sig = sig
        self._run += 1

    def _flush(self) -> None:
        if self._run:
            dtype, shape = self._sig
            self.kinds[(dtype.str, tuple(shape))] += self._run
        self._run = 0

    def digest(self) -> str:
        self._flush()
        self._sig = None
        kinds = ",".join(f"{d}{list(s)}x{c}" for (d, s), c in sorted(self.kinds.items()))
        return f"crc32={self.crc:08x};n={self.n};{kinds}"


def _mode_name(m) -> str:
    return str(getattr(m, "name", m))


def meta_checksum(steps, names, modes=None, workers=None) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([list(map(int, steps)), list(names)]).encode())
    if modes is not None:
        h.update(json.dumps(sorted(_mode_name(m) for m in modes)).encode())
    if workers is not None:
        h.update(json.dumps(list(workers)).encode())
    return h.hexdigest()[:16]


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
    t = _now()
    import numpy

    loads, parser = _json_loads()
    phases["import"] = _now() - t
    rss_after_import = _rss_mib()
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
    t = _now()
    index = _floor_index(trial_path, loads)
    phases["index"] = _now() - t
    steps = [step for step, _, _ in index]
    names = sorted({name for _, _, rows in index for name, _, _ in rows})
    phases["index_and_names"] = _now() - t
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
            t = _now()
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
            phases[f"pass{p}"] = _now() - t
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
    out["peak_rss_mib"] = _peak_rss_mib()
    out["rss_after_import_mib"] = rss_after_import
    out["env"] = dict(_env_info(), impl="floor", executable=sys.executable)
    return out


def run(impl: str, trial_path: str, workload: str) -> dict:
    if workload not in WORKLOADS:
        raise SystemExit(f"unknown --workload {workload!r} (one of {', '.join(WORKLOADS)})")
    phases: dict[str, float] = {}
    t = _now()
    create_trial, impl_info = load_impl(impl)
    phases["import"] = _now() - t
    rss_after_import = _rss_mib()
    out: dict = {
        "impl": impl,
        "workload": workload,
        "trial": trial_path,
        "storage": "s3" if trial_path.startswith("s3://") else "local",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }

    t = _now()
    trial = create_trial(trial_path)
    phases["create_trial"] = _now() - t
    check = Checksum()

    if workload == "metadata":
        t = _now()
        steps = trial.steps()
        phases["steps"] = _now() - t
        t = _now()
        modes = list(trial.modes())
        phases["modes"] = _now() - t
        t = _now()
        names = trial.tensor_names()
        phases["tensor_names"] = _now() - t
        t = _now()
        workers = list(trial.workers())
        phases["workers"] = _now() - t
        headline = sum(
            phases[k] for k in ("create_trial", "steps", "modes", "tensor_names", "workers")
        )
        out["meta_checksum"] = meta_checksum(steps, names, modes, workers)
        out["modes"] = sorted(_mode_name(m) for m in modes)
        out["workers"] = workers
        out["checksum"] = out["meta_checksum"]
    else:
        t = _now()
        steps = trial.steps()
        names = trial.tensor_names()
        phases["list"] = _now() - t
        out["meta_checksum"] = meta_checksum(steps, names)
        if not steps or not names:
            raise SystemExit(f"trial {trial_path} has {len(steps)} steps, {len(names)} tensors")
        if workload == "values100":
            plan = [
                (steps[i * len(steps) // 100], names[(i * 17) % len(names)]) for i in range(100)
            ]
            reads = hashing = 0.0
            for step, name in plan:
                t = _now()
                value = trial.tensor(name).value(step)
                t1 = _now()
                check.add(value)
                hashing += _now() - t1
                reads += t1 - t
            phases["reads"] = reads
        else:  # values_all
            hashing = 0.0
            for p in (1, 2):
                reads = 0.0
                for step in steps:
                    t = _now()
                    values = [trial.tensor(name).value(step) for name in names]
                    t1 = _now()
                    for value in values:
                        check.add(value)
                    hashing += _now() - t1
                    reads += t1 - t
                phases[f"pass{p}"] = reads
            phases["reads"] = phases["pass1"] + phases["pass2"]
        headline = phases["reads"]
        out["checksum"] = check.digest()
        phases["checksum_s"] = hashing

    out["n_steps"] = len(steps)
    out["n_tensors"] = len(names)
    out["values_read"] = check.n
    out["phases"] = {k: round(v, 4) for k, v in phases.items()}
    out["seconds"] = round(headline, 4)
    # Everything after the import except the checksum, which is timed apart (pass1/pass2 are
    # parts of "reads").
    not_in_total = ("import", "checksum_s", "pass1", "pass2")
    out["total_s"] = round(sum(v for k, v in phases.items() if k not in not_in_total), 4)
    out["peak_rss_mib"] = _peak_rss_mib()
    out["rss_after_import_mib"] = rss_after_import
    out["env"] = dict(_env_info(), impl=impl, **impl_info, executable=sys.executable)
    return out


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTEST_CURRENT_TEST"):
        print(
            "bench/workloads.py is a benchmark; it is never run or timed inside the test suite",
            file=sys.stderr,
        )
        return 2
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--impl", required=True, choices=("smdebug", "ours"))
    p.add_argument("--trial", required=True, help="local trial directory or s3://bucket/prefix")
    p.add_argument("--workload", required=True, choices=WORKLOADS + FLOOR_WORKLOADS)
    args = p.parse_args(argv)
    trial = args.trial.strip()
    if not trial.startswith("s3://"):
        trial = os.path.abspath(trial)
        if not os.path.isdir(trial):
            raise SystemExit(f"no trial directory {trial}")
    if args.workload in FLOOR_WORKLOADS:
        if trial.startswith("s3://"):
            raise SystemExit("the floor workloads read a local trial")
        result = run_floor(trial, args.workload)
    else:
        result = run(args.impl, trial, args.workload)
    sys.stdout.flush()
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
