"""``rule-evaluator watch``: a rule service over a log root where new runs keep appearing.

Modules, bottom-up: ``request`` (the arguments), ``container.discovery`` (the runs under the
root, and the shard a run falls in), ``experiment`` (an MLflow experiment's runs instead),
``forks`` (the fork server every run's processes come from), ``live`` (one run: a single ``rule-evaluator`` run in a process of
its own, and what it has written), ``status`` (``watch_status.json`` and the index page),
``metrics`` (the counters and the ``/healthz`` + ``/metrics`` server), ``command`` (the
subcommand). The watch process runs no rule code and reads no run's data: every run is
evaluated by the command a single run uses, supervised and unprivileged. See docs/watch.md.
"""

from container.watch.command import main

__all__ = ["main"]
