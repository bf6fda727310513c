"""The watch's counters, and ``--status-address``: ``/healthz`` and ``/metrics`` (Prometheus'
text format) served by ``prometheus-client``'s WSGI app on the standard library's WSGI server.

Metrics (all of this process; a restarted watch starts them again from zero):

* ``rule_evaluator_watch_runs_live``: runs being evaluated now;
* ``rule_evaluator_watch_runs_ended_total{status}``: runs whose evaluation ended here;
* ``rule_evaluator_watch_runs_queued``: runs found and waiting for a place (``--max-live``);
* ``rule_evaluator_watch_runs_kept``: runs that had ended before this watch started;
* ``rule_evaluator_watch_firings_total{rule}``: rules seen turning ``IssuesFound``;
* ``rule_evaluator_watch_poll_duration_seconds``: one look at the root and at every run;
* ``rule_evaluator_watch_errors_total{kind}``: ``discovery`` (a folder that could not be
  listed, a run path refused), ``run`` (a run that ended in Error), ``status_file``;
* the process' own memory and CPU (``process_*``, Linux).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    make_wsgi_app,
)

from evaluator.errors import ConfigurationError

__all__ = ["StatusServer", "WatchMetrics"]

_PREFIX = "rule_evaluator_watch"


class WatchMetrics:
    """The watch's metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.runs_live = Gauge(f"{_PREFIX}_runs_live", "Runs being evaluated", registry=r)
        self.runs_queued = Gauge(
            f"{_PREFIX}_runs_queued", "Runs found, waiting for a place (--max-live)", registry=r
        )
        self.runs_kept = Gauge(
            f"{_PREFIX}_runs_kept", "Runs that had ended before this watch started", registry=r
        )
        self.runs_ended = Counter(
            f"{_PREFIX}_runs_ended", "Runs whose evaluation ended", ["status"], registry=r
        )
        self.firings = Counter(
            f"{_PREFIX}_firings", "Rules seen turning IssuesFound", ["rule"], registry=r
        )
        self.poll_duration = Histogram(
            f"{_PREFIX}_poll_duration_seconds",
            "One look at the root and at every live run",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.errors = Counter(f"{_PREFIX}_errors", "Errors, by kind", ["kind"], registry=r)
        ProcessCollector(registry=r)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # one line per scrape on stderr helps no one


_StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class StatusServer:
    """``/healthz`` (``ok``) and every other path the metrics, in a thread of its own."""

    def __init__(self, address: tuple[str, int], metrics: WatchMetrics) -> None:
        metrics_app = make_wsgi_app(metrics.registry)

        def app(environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == "/healthz":
                start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
                return [b"ok\n"]
            result: Iterable[bytes] = metrics_app(environ, start_response)
            return result

        host, port = address
        try:
            self._server: WSGIServer = make_server(host, port, app, handler_class=_Quiet)
        except OSError as e:
            raise ConfigurationError(
                f"cannot serve --status-address {host}:{port}: {e.strerror or e}; give a free "
                "port on an address of this machine"
            ) from None
        self.port = self._server.server_port
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="watch-status", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
