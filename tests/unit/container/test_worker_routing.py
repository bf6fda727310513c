"""A shared worker's output routing (container/worker/routing.py): what a run's threads print
or log goes to that run's stream, whatever thread of the run writes it; the rest, and a
thread that outlived its run, to the worker's own."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.support.evaluator_cli import ROOT

# In a process of its own: the patch of threading.Thread.start is the worker's, for good.
SCRIPT = textwrap.dedent("""
    import io, json, logging, sys, threading
    from container.worker.routing import RoutedStream, inherit_context_in_threads, run_context

    inherit_context_in_threads()
    own = io.StringIO()
    routed = RoutedStream(own)
    handler = logging.StreamHandler(routed)
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    runs = {name: io.StringIO() for name in ("a", "b")}

    def run(name):
        def deeper():  # a thread the run's thread starts (a rule's, a sink's)
            logging.getLogger("rule").info("logged by %s's rule", name)
        inner = threading.Thread(target=deeper)
        inner.start()
        inner.join()
        routed.write(f"printed by {name}\\n")

    threads = [threading.Thread(target=run_context(stream).run, args=(run, name))
               for name, stream in runs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    routed.write("the worker's own\\n")
    runs["a"].close()
    late = threading.Thread(target=run_context(runs["a"]).run, args=(routed.write, "late\\n"))
    late.start()
    late.join()
    print(json.dumps([runs["b"].getvalue(), own.getvalue()]), file=sys.__stdout__)
""")


def test_each_runs_threads_write_to_its_stream_and_the_rest_to_the_workers() -> None:
    """Two runs, each logging from a thread its own thread started and printing: each run's
    stream holds its lines only; the worker's stream holds its own line, and the line of a
    thread whose run's stream is closed."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    run_b, own = json.loads(done.stdout)
    assert run_b == "logged by b's rule\nprinted by b\n"
    assert own == "the worker's own\nlate\n"
