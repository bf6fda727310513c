"""Behaviours smdebug 1.0.34's own analysis tests check, written anew against our ``smdebug``
names, on trials written by ``evaluator.testing`` (or hand-written index files)."""
