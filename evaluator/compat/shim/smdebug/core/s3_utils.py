"""smdebug.core.s3_utils: ``list_s3_objects``."""

from __future__ import annotations

from evaluator.engine.runner import get_loop
from evaluator.errors import SMDebugNotImplementedError
from evaluator.storage import open_storage

__all__ = ["list_s3_objects"]


def list_s3_objects(
    bucket: str, prefix: str, start_after_key: str | None = None, delimiter: str = ""
) -> tuple[list[str], str | None]:
    """The keys of ``bucket`` that start with ``prefix`` and sort after ``start_after_key``,
    in key order, and the last of them (None when there is none)."""
    if delimiter:
        raise SMDebugNotImplementedError("list_s3_objects lists without a delimiter only")
    storage = open_storage(f"s3://{bucket}")

    async def collect() -> list[str]:
        try:
            return [o.key async for o in storage.list_after(prefix, start_after_key or prefix)]
        finally:
            await storage.aclose()

    keys: list[str] = get_loop().run(collect())
    return keys, (keys[-1] if keys else None)
