"""The asyncio S3 client options of ``s3_cpu.py`` (``--impl``: aiobotocore, botocore-signer,
own-sigv4, ours, obstore, awscrt; see its docstring), one class each behind the same
``Option``: open, GET one object, LIST one page, close. Each imports its client only when
opened, so the module loads in any of the bench's venvs."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import os
import sys
import time
from typing import Any
from urllib.parse import quote, unquote_plus
from xml.etree import ElementTree

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
