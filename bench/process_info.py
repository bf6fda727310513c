"""What every bench workload reports about its process and machine: a monotonic clock, the
resident and peak memory, and the environment (Python, CPU, numpy, protobuf, the project's
version). Stdlib only at import time: both venvs (ours and smdebug's) import it."""

from __future__ import annotations

import os
import platform
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)


def now() -> float:
    return time.perf_counter()


def rss_mib() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def peak_rss_mib() -> float:
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.platform == "darwin":  # bytes there
        kib /= 1024
    return round(kib / 1024, 1)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def project_version() -> str:
    try:
        import tomllib

        with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
            return tomllib.load(f)["project"]["version"]
    except Exception:  # noqa: BLE001 - informational only
        return "?"


def env_info() -> dict:
    info = {
        "python": platform.python_version(),
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
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
