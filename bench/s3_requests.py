"""Count the S3 requests a reader makes: a forwarding HTTP proxy on 127.0.0.1 in front of moto.

    with CountingProxy(moto_url) as proxy:      # point AWS_ENDPOINT_URL at proxy.endpoint
        ...run the reader...
    proxy.snapshot()   # {"counts": {"LIST": n, "GET": n, "RANGED_GET": n, "HEAD": n, "OTHER": n, "total": n}, ...}

The forwarding is tests/support/faulty_proxy.py's ``FaultyProxy`` with its fault rate at zero,
loaded straight from its file (stdlib only, so this works even when ``evaluator`` does not
import). Only the hook that sees each request is overridden, to classify it:

* ``LIST``: a GET whose query has ``list-type`` (ListObjectsV2) or ``prefix`` / ``marker`` /
  ``delimiter`` / ``continuation-token`` (ListObjects);
* ``RANGED_GET``: any other GET with a ``Range`` header;
* ``GET``: any other GET of an object (path-style ``/bucket/key``);
* ``HEAD``: a HEAD;
* ``OTHER``: everything else (PUT, POST, a GET of the bucket itself such as ``?location`` ...).

Retries count as requests too (they are what the server sees). Response body bytes are summed
per kind. The proxy opens one upstream connection per request (``Connection: close``), which
adds a little latency, so figures measured through it are counts, not timings.

Connections: the moto server answers every request with ``Connection: close``, so a client never
reuses a connection to it. ``FaultyProxy`` keeps client connections alive instead, which changes
what the reader under test does: smdebug creates its boto3 client in the parent process and then
reads index files in a forked ``multiprocessing.Pool`` whose workers inherit the parent's idle
keep-alive sockets; two processes then talk over one socket and get each other's answers (a
keep-alive run read wrong values without any error). So by default this proxy answers like moto:
``Connection: close`` on every response, then closes (``keep_alive=False``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import threading
from collections import Counter
from urllib.parse import parse_qsl, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FAULTY_PROXY_PATH = os.path.join(REPO, "tests", "support", "faulty_proxy.py")
KINDS = ("LIST", "GET", "RANGED_GET", "HEAD", "OTHER")
_LIST_PARAMS = {"list-type", "prefix", "marker", "delimiter", "continuation-token", "start-after"}
SAMPLES_PER_KIND = 3


def _load_faulty_proxy():
    spec = importlib.util.spec_from_file_location("_bench_faulty_proxy", FAULTY_PROXY_PATH)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {FAULTY_PROXY_PATH}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise
    return module


_fp = _load_faulty_proxy()


def classify(request_line: str, range_header: str | None) -> str:
    """The kind of one request, from its request line (``GET /b/k?x HTTP/1.1``) and Range."""
    parts = request_line.split()
    if len(parts) < 2:
        return "OTHER"
    method, target = parts[0].upper(), parts[1]
    if method == "HEAD":
        return "HEAD"
    if method != "GET":
        return "OTHER"
    url = urlsplit(target)
    params = {k for k, _ in parse_qsl(url.query, keep_blank_values=True)}
    if params & _LIST_PARAMS:
        return "LIST"
    if range_header:
        return "RANGED_GET"
    segments = [s for s in url.path.split("/") if s]
    return "GET" if len(segments) >= 2 else "OTHER"  # path-style: /bucket/key


class CountingProxy(_fp.FaultyProxy):
    """``FaultyProxy`` that never injects a fault and counts requests by kind."""

    def __init__(self, upstream: str, *, keep_alive: bool = False) -> None:
        super().__init__(upstream, rate=0.0, max_faults=0)
        self.keep_alive = keep_alive
        self._lock = threading.Lock()
        self.kinds: Counter[str] = Counter()
        self.body_bytes: Counter[str] = Counter()
        self.samples: dict[str, list[str]] = {}

    def _draw(self, request):  # called once for every request received
        kind = classify(request.head, request.header("range"))
        with self._lock:
            self.kinds[kind] += 1
            sample = self.samples.setdefault(kind, [])
            if len(sample) < SAMPLES_PER_KIND:
                line = request.head if len(request.head) <= 200 else request.head[:197] + "..."
                rng = request.header("range")
                sample.append(line + (f" [Range: {rng}]" if rng else ""))
        return super()._draw(request)

    async def _answer(self, request, writer) -> bool:
        if self.keep_alive:
            return await super()._answer(request, writer)
        # FaultyProxy's answer (no fault is ever drawn), but ending like moto: Connection: close.
        self._draw(request)
        response = await asyncio.wait_for(self._forward(request), _fp.IDLE_TIMEOUT)
        headers = [(k, v) for k, v in response.headers if k.lower() not in _fp._HOP_BY_HOP]
        if not request.head.startswith("HEAD "):  # HEAD keeps the size of the body it omits
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            headers.append(("Content-Length", str(len(response.body))))
        headers.append(("Connection", "close"))
        writer.write(_fp._encode(_fp._Message(response.head, headers, response.body)))
        await writer.drain()
        return False  # the connection ends here

    async def _forward(self, request):
        response = await super()._forward(request)
        kind = classify(request.head, request.header("range"))
        with self._lock:
            self.body_bytes[kind] += len(response.body)
        return response

    def snapshot(self) -> dict:
        with self._lock:
            counts = {k: self.kinds.get(k, 0) for k in KINDS}
            counts["total"] = sum(counts.values())
            return {
                "counts": counts,
                "body_bytes": {k: self.body_bytes.get(k, 0) for k in KINDS},
                "samples": {k: list(v) for k, v in sorted(self.samples.items())},
            }


def main() -> int:
    """``python bench/s3_requests.py UPSTREAM [--keep-alive]``: serve until stdin closes, after
    printing the endpoint on stdout. bench/s3_cpu_run.py runs it in a process of its own, so that
    the proxy's CPU is not charged to the client measured."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("upstream")
    parser.add_argument("--keep-alive", action="store_true")
    args = parser.parse_args()
    proxy = CountingProxy(args.upstream, keep_alive=args.keep_alive).start()
    print(proxy.endpoint, flush=True)
    try:
        sys.stdin.read()  # the parent closes our stdin (or dies): stop
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
