"""smdebug.core.access_layer.utils: ``has_training_ended``, for scripts that wait for a job."""

from __future__ import annotations

from evaluator.engine.runner import get_loop
from evaluator.formats.keys import END_OF_JOB_KEY
from evaluator.storage import open_storage

__all__ = ["has_training_ended"]


def has_training_ended(trial_prefix: str) -> bool:
    """Whether ``training_job_end.ts`` exists under the trial (a folder or ``s3://`` prefix)."""
    storage = open_storage(trial_prefix)

    async def ended() -> bool:
        try:
            return await storage.exists(END_OF_JOB_KEY)
        finally:
            await storage.aclose()

    return bool(get_loop().run(ended()))
