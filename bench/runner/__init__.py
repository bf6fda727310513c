"""The benchmark runner behind ``bench/run.py`` (bench/README.md): one job per module.

* ``cli``: the command line, and which kind of run it asks for;
* ``local_runs``: the offline workloads, local or on S3, every side ``--repeat`` times;
* ``sides``: one workload of one side in a fresh process, medians, the git state;
* ``prepare``: the smdebug venv, the trials, the page cache, whether ours imports;
* ``moto``: the moto S3 server of ``--s3``, ``--live`` and ``--s3-cpu``;
* ``s3_counts``: S3 request counts through a counting proxy;
* ``live_runs`` and ``live_process``: live latency (``--live``) and its processes;
* ``results``: bench/results.json;
* ``report`` (RESULTS.md), with ``report_figures``, ``report_sections`` and ``report_rules``.

Modules import each other as ``runner.*`` and the workload scripts (``workloads``,
``make_trial``, ``s3_cpu_run``) by their names: ``bench/run.py`` puts bench/ on ``sys.path``.
"""
