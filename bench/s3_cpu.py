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
import hmac
import json
import os
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, unquote_plus
from xml.etree import ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
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


# ------------------------------------------------------------------ the async options


class Option:
    """``get(key) -> bytes``, ``list(prefix, start_after) -> [(key, size)]`` (one page)."""

    async def open(self, args: argparse.Namespace) -> None: ...
    async def get(self, key: str) -> bytes: ...
    async def list(self, prefix: str, start_after: str | None) -> list[tuple[str, int]]: ...
    async def close(self) -> None: ...


class Aiobotocore(Option):
    async def open(self, args: argparse.Namespace) -> None:
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session

        config = AioConfig(
            retries={"mode": "standard", "total_max_attempts": 10},
            max_pool_connections=64,
            connect_timeout=10.0,
            read_timeout=60.0,
        )
        self.bucket = args.bucket
        self._cm = get_session().create_client("s3", config=config)
        self.client = await self._cm.__aenter__()

    async def get(self, key: str) -> bytes:
        response = await self.client.get_object(Bucket=self.bucket, Key=key)
        async with response["Body"] as body:
            data: bytes = await body.read()
        return data

    async def list(self, prefix: str, start_after: str | None) -> list[tuple[str, int]]:
        params: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": 1000}
        if start_after:
            params["StartAfter"] = start_after
        page = await self.client.list_objects_v2(**params)
        return [(item["Key"], item["Size"]) for item in page.get("Contents", ())]

    async def close(self) -> None:
        await self._cm.__aexit__(None, None, None)


class _AiohttpBase(Option):
    """aiohttp with path-style URLs to the endpoint; subclasses sign."""

    async def open(self, args: argparse.Namespace) -> None:
        import aiohttp
        from aiobotocore.session import get_session

        self.bucket = args.bucket
        self.endpoint = os.environ["AWS_ENDPOINT_URL"].rstrip("/")
        self.host = self.endpoint.split("://", 1)[1]
        self.region = os.environ.get("AWS_REGION", "us-east-1")
        self.credentials = await get_session().get_credentials()
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=64),
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding",),
        )

    async def _send(self, path: str, query: str) -> bytes:
        from yarl import URL

        frozen = await self.credentials.get_frozen_credentials()
        headers = self.sign(frozen, path, query)
        url = f"{self.endpoint}{path}" + (f"?{query}" if query else "")
        async with self.session.get(URL(url, encoded=True), headers=headers) as response:
            body = await response.read()
            if response.status >= 300:
                raise RuntimeError(f"{response.status}: {body[:200]!r}")
            return body

    def sign(self, credentials: Any, path: str, query: str) -> dict[str, str]:
        raise NotImplementedError

    async def get(self, key: str) -> bytes:
        return await self._send(f"/{self.bucket}/{quote(key, safe='/~')}", "")

    async def list(self, prefix: str, start_after: str | None) -> list[tuple[str, int]]:
        params = {"list-type": "2", "encoding-type": "url", "prefix": prefix, "max-keys": "1000"}
        if start_after:
            params["start-after"] = start_after
        query = "&".join(
            f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(params.items())
        )
        root = ElementTree.fromstring(await self._send(f"/{self.bucket}", query))
        ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
        return [
            (unquote_plus(c.findtext(f"{ns}Key") or ""), int(c.findtext(f"{ns}Size") or 0))
            for c in root.iter(f"{ns}Contents")
        ]

    async def close(self) -> None:
        await self.session.close()


class BotocoreSigner(_AiohttpBase):
    def sign(self, credentials: Any, path: str, query: str) -> dict[str, str]:
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest

        url = f"{self.endpoint}{path}" + (f"?{query}" if query else "")
        request = AWSRequest(method="GET", url=url, headers={})
        S3SigV4Auth(credentials, "s3", self.region).add_auth(request)
        return dict(request.headers.items())


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class OwnSigV4(_AiohttpBase):
    def sign(self, credentials: Any, path: str, query: str) -> dict[str, str]:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        day = stamp[:8]
        headers = {"host": self.host, "x-amz-content-sha256": EMPTY_SHA256, "x-amz-date": stamp}
        if credentials.token:
            headers["x-amz-security-token"] = credentials.token
        names = sorted(headers)
        signed = ";".join(names)
        canonical = "\n".join(
            ["GET", path, query, *[f"{n}:{headers[n]}" for n in names], "", signed, EMPTY_SHA256]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = (
            f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        )
        key = ("AWS4" + credentials.secret_key).encode()
        for part in (day, self.region, "s3", "aws4_request"):  # derived anew every request
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed}, Signature={signature}"
        )
        return headers


class Ours(Option):
    async def open(self, args: argparse.Namespace) -> None:
        sys.path.insert(0, REPO)
        from evaluator.storage import S3Storage

        self.storage = S3Storage(f"s3://{args.bucket}", count_requests=True)

    async def get(self, key: str) -> bytes:
        return await self.storage.read(key)

    async def list(self, prefix: str, start_after: str | None) -> list[tuple[str, int]]:
        return [(o.key, o.size) async for o in self.storage.list_after(prefix, start_after)]

    async def close(self) -> None:
        await self.storage.aclose()


class Obstore(Option):
    async def open(self, args: argparse.Namespace) -> None:
        import obstore
        from obstore.store import S3Store

        self.obstore = obstore
        self.store = S3Store(
            args.bucket,
            endpoint=os.environ["AWS_ENDPOINT_URL"],
            region=os.environ.get("AWS_REGION", "us-east-1"),
            access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
            secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            client_options={"allow_http": True},
        )

    async def get(self, key: str) -> bytes:
        result = await self.obstore.get_async(self.store, key)
        return bytes(await result.bytes_async())

    async def list(self, prefix: str, start_after: str | None) -> list[tuple[str, int]]:
        stream = self.obstore.list(self.store, prefix=prefix, offset=start_after, chunk_size=1000)
        out: list[tuple[str, int]] = []
        async for batch in stream:
            out += [(o["path"], o["size"]) for o in batch]
            break  # one page, as the others
        return out


class Awscrt(Option):
    """awscrt's S3 client: every request is a "meta request" with callbacks on CRT threads."""

    async def open(self, args: argparse.Namespace) -> None:
        from awscrt.auth import AwsCredentialsProvider
        from awscrt.io import ClientBootstrap, DefaultHostResolver, EventLoopGroup
        from awscrt.s3 import S3Client, S3RequestTlsMode

        self.bucket = args.bucket
        self.host = os.environ["AWS_ENDPOINT_URL"].split("://", 1)[1].rstrip("/")
        group = EventLoopGroup(2)
        bootstrap = ClientBootstrap(group, DefaultHostResolver(group))
        self.client = S3Client(
            bootstrap=bootstrap,
            region=os.environ.get("AWS_REGION", "us-east-1"),
            tls_mode=S3RequestTlsMode.DISABLED,
            credential_provider=AwsCredentialsProvider.new_default_chain(bootstrap),
        )
        self.loop = asyncio.get_running_loop()

    async def _request(self, path: str, operation: str | None) -> bytes:
        from awscrt.http import HttpHeaders, HttpRequest
        from awscrt.s3 import S3RequestType

        chunks: list[bytes] = []
        status: list[int] = []
        done: asyncio.Future[None] = self.loop.create_future()

        def on_headers(status_code: int, headers: Any, **_: Any) -> None:
            status.append(status_code)

        def on_body(chunk: bytes, offset: int, **_: Any) -> None:
            chunks.append(bytes(chunk))

        def on_done(error: BaseException | None = None, **_: Any) -> None:
            def finish() -> None:
                if not done.done():
                    done.set_exception(error) if error else done.set_result(None)

            self.loop.call_soon_threadsafe(finish)

        request = HttpRequest("GET", path, HttpHeaders([("Host", self.host)]))
        self.client.make_request(
            type=S3RequestType.DEFAULT if operation else S3RequestType.GET_OBJECT,
            operation_name=operation,
            request=request,
            on_headers=on_headers,
            on_body=on_body,
            on_done=on_done,
        )
        await done
        return b"".join(chunks)

    async def get(self, key: str) -> bytes:
        return await self._request(f"/{self.bucket}/{quote(key, safe='/~')}", None)

    async def list(self, prefix: str, start_after: str | None) -> list[tuple[str, int]]:
        query = f"list-type=2&max-keys=1000&prefix={quote(prefix, safe='')}"
        if start_after:
            query += f"&start-after={quote(start_after, safe='')}"
        root = ElementTree.fromstring(
            await self._request(f"/{self.bucket}?{query}", "ListObjectsV2")
        )
        ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
        return [
            (c.findtext(f"{ns}Key") or "", int(c.findtext(f"{ns}Size") or 0))
            for c in root.iter(f"{ns}Contents")
        ]


OPTIONS: dict[str, type[Option]] = {
    "aiobotocore": Aiobotocore,
    "botocore-signer": BotocoreSigner,
    "own-sigv4": OwnSigV4,
    "ours": Ours,
    "obstore": Obstore,
    "awscrt": Awscrt,
}


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
