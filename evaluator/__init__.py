"""Open-source rule evaluator for SageMaker Debugger (smdebug) training data.

Subpackages: ``formats`` (pure parsers), ``storage`` (local / S3 / in-memory), ``trial`` (the
smdebug-compatible Trial/Tensor API over the trial cache), ``compat`` (``smdebug.*`` import
names), ``testing`` (a trial writer for tests and rule authors).
"""

__version__ = "0.1.0"
