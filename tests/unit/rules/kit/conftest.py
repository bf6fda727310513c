"""Fixtures of the rule kit tests: the built-in rule tests' ``make_trial`` (a trial from
``{step: {name: array}}``) and ``keras_like`` (a trial laid out as smdebug's Keras hook writes
one), which the kit's windows and modes are tested on."""

from tests.unit.rules_builtin.conftest import keras_like, make_trial, opened_trials

__all__ = ["keras_like", "make_trial", "opened_trials"]
