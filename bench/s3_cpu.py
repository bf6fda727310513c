"""S3 client CPU per request: one S3 client option in a fresh process, against a moto server.

    python bench/s3_cpu.py --impl ours --bucket bench-cpu --prefix cpu/ --gets 1000

prints one JSON line: process CPU (``time.process_time``, every thread of this process; moto
runs in its own process and is not counted) per GET of a small object, per idle LIST (an empty
answer: what a poll that finds nothing new costs), and per full 1000-key LIST page, measured
after the client is open and warm (imports, client creation and a warm-up excluded).

The options (``--impl``), all reading the same objects with the same concurrency:

* ``aiobotocore``: the S3 path before issue 13 (aiobotocore client, ``get_object`` and
  ``list_objects_v2``, botocore's standard retries), as ``S3Storage`` used it;
* ``botocore-signer``: aiohttp, with each request signed by botocore's ``S3SigV4Auth`` on an
  ``AWSRequest``;
* ``own-sigv4``: aiohttp, the canonical request built here from botocore's credentials, the
  signing key derived for every request;
* ``ours``: ``evaluator.storage.S3Storage``: obstore since issue 27 (the hand-written wire of
  issue 13 before it), with retries, deadlines, translation and counts on top;
* ``obstore``: the Rust ``object_store`` crate (``obstore``) alone, in the alternatives' venv;
* ``awscrt``: the AWS Common Runtime's S3 client (``awscrt.s3``), in the alternatives' venv;
* ``smdebug``: smdebug 1.0.34's ``S3Handler`` (boto3), in the smdebug venv.

A benchmark, not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from s3_cpu_options import OPTIONS

CONCURRENCY = 16
IMPLS = (
    "smdebug",
    "aiobotocore",
    "botocore-signer",
    "own-sigv4",
    "ours",
    "obstore",
    "awscrt",
)
# need bench/.work/venv-s3alt (aiobotocore and aiohttp left the project with issue 27)
ALT_IMPLS = ("aiobotocore", "botocore-signer", "own-sigv4", "obstore", "awscrt")


def keys(prefix: str, n: int) -> list[str]:
    return [f"{prefix}index/000000000/{i:012d}_worker_0.json" for i in range(n)]


async def bounded(jobs: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(job: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await job()

    return await asyncio.gather(*(one(job) for job in jobs))


# ------------------------------------------------------------------ measuring


def _rusage() -> tuple[float, float]:
    """User and system CPU seconds of this process (all threads) and its reaped children
    (smdebug reads objects in a forked pool)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + children.ru_utime, own.ru_stime + children.ru_stime


class Meter:
    def __init__(self) -> None:
        self.phases: dict[str, dict[str, float]] = {}

    def measure(self, name: str, count: int, run: Callable[[], Any]) -> Any:
        (user, system), wall = _rusage(), time.perf_counter()
        result = run()
        (user_after, system_after), wall = _rusage(), time.perf_counter() - wall
        user, system = user_after - user, system_after - system
        self.phases[name] = {
            "count": count,
            "cpu_s": user + system,
            "user_s": user,
            "sys_s": system,
            "wall_s": wall,
            "cpu_ms_per": 1000 * (user + system) / count,
            "user_ms_per": 1000 * user / count,
            "sys_ms_per": 1000 * system / count,
        }
        return result


def run_async(args: argparse.Namespace) -> dict[str, Any]:
    option = OPTIONS[args.impl]()
    all_keys = keys(args.prefix, args.objects)
    gets = [all_keys[i % len(all_keys)] for i in range(args.gets)]
    meter = Meter()
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(option.open(args))
        # warm-up: connections, credentials, lazy imports
        loop.run_until_complete(bounded([lambda k=k: option.get(k) for k in all_keys[:32]]))
        loop.run_until_complete(option.list(args.prefix, all_keys[-1]))
        loop.run_until_complete(option.list(args.prefix, None))
        bodies = meter.measure(
            "get",
            len(gets),
            lambda: loop.run_until_complete(bounded([lambda k=k: option.get(k) for k in gets])),
        )

        async def idle_lists() -> list[Any]:
            return [await option.list(args.prefix, all_keys[-1]) for _ in range(args.lists)]

        idle = meter.measure("list_idle", args.lists, lambda: loop.run_until_complete(idle_lists()))

        async def full_pages() -> list[Any]:
            return [await option.list(args.prefix, None) for _ in range(args.pages)]

        pages = meter.measure(
            "list_page", args.pages, lambda: loop.run_until_complete(full_pages())
        )
        loop.run_until_complete(option.close())
    finally:
        loop.close()
    return check(meter, bodies, idle, pages, all_keys)


def run_smdebug(args: argparse.Namespace) -> dict[str, Any]:
    """smdebug's own S3 handler, as its trial reads index files and lists them."""
    from smdebug.core.access_layer.s3handler import ListRequest, ReadObjectRequest, S3Handler

    all_keys = keys(args.prefix, args.objects)
    gets = [all_keys[i % len(all_keys)] for i in range(args.gets)]
    meter = Meter()
    uri = f"s3://{args.bucket}/"
    # smdebug's reads of many index files go through get_objects (a forked pool from 100 on).
    S3Handler.get_objects([ReadObjectRequest(uri + k) for k in all_keys[:32]])
    S3Handler.list_prefixes([ListRequest(args.bucket, args.prefix, StartAfter=all_keys[-1])])

    def get_all() -> list[bytes]:
        return list(S3Handler.get_objects([ReadObjectRequest(uri + k) for k in gets]))

    bodies = meter.measure("get", len(gets), get_all)

    def lists(start_after: str | None, n: int) -> list[list[tuple[str, int]]]:
        out = []
        for _ in range(n):
            request = ListRequest(args.bucket, args.prefix, StartAfter=start_after or "")
            names = S3Handler.list_prefixes([request])[0]
            out.append([(name, -1) for name in names])
        return out

    idle = meter.measure("list_idle", args.lists, lambda: lists(all_keys[-1], args.lists))
    pages = meter.measure("list_page", args.pages, lambda: lists(None, args.pages))
    return check(meter, bodies, idle, pages, all_keys, sizes=False)


def check(
    meter: Meter,
    bodies: list[bytes],
    idle: list[Any],
    pages: list[Any],
    all_keys: list[str],
    *,
    sizes: bool = True,
) -> dict[str, Any]:
    """The figures, plus whether every option read the same bytes and listed the same keys."""
    digest = hashlib.sha256(b"".join(bodies)).hexdigest()[:16]
    listed = [key for key, _ in pages[0]] if pages else []
    return {
        "phases": meter.phases,
        "body_digest": digest,
        "idle_empty": all(not page for page in idle),
        "page_keys": len(listed),
        "page_matches": listed == all_keys[: len(listed)]
        and len(listed) == min(1000, len(all_keys)),
        "sizes_listed": sizes,
    }


def main() -> int:
    if "pytest" in sys.modules:
        raise SystemExit("a benchmark, not a test")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=IMPLS, required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", default="cpu/")
    parser.add_argument("--objects", type=int, default=1000, help="objects stored (one page)")
    parser.add_argument("--gets", type=int, default=1000)
    parser.add_argument("--lists", type=int, default=200, help="idle LISTs")
    parser.add_argument("--pages", type=int, default=5, help="full 1000-key LIST pages")
    args = parser.parse_args()
    started = time.process_time()
    if args.impl == "smdebug":
        result = run_smdebug(args)
    else:
        result = run_async(args)
    result.update(
        impl=args.impl,
        python=sys.version.split()[0],
        process_cpu_s=time.process_time() - started,
    )
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # obstore's Rust runtime can abort while the interpreter tears it down (SIGABRT after the
    # figures are printed); nothing is left to clean up here, so leave at once.
    os._exit(code)
