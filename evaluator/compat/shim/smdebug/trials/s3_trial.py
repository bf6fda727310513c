"""smdebug.trials.s3_trial: ``S3Trial``."""

from smdebug.trials import S3Trial

__all__ = ["S3Trial"]
