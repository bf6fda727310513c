"""examples/kubernetes/watch-statefulset.yaml as Kubernetes would run it: each pod's arguments,
with its ordinal put in for ``$(POD_INDEX)``, are a valid ``watch`` request for its own shard,
the shards cover every run once, and the probe and the port are the status server's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from container.discovery import in_shard
from container.watch.request import parse_request

yaml = pytest.importorskip("yaml")
MANIFEST = (
    Path(__file__).resolve().parents[3] / "examples" / "kubernetes" / "watch-statefulset.yaml"
)


def _statefulset() -> dict[str, Any]:
    (document,) = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    assert document["kind"] == "StatefulSet"
    return dict(document)


def _container() -> dict[str, Any]:
    (container,) = _statefulset()["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _args_of_pod(index: int) -> list[str]:
    """The container's arguments with ``$(VAR)`` expanded as the kubelet does."""
    env = {"POD_INDEX": str(index)}
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in _container()["args"]]


def test_each_pod_watches_its_own_shard() -> None:
    """Pod i's arguments are a watch request for shard i of as many shards as replicas."""
    replicas = _statefulset()["spec"]["replicas"]
    for index in range(replicas):
        args = _args_of_pod(index)
        assert args[0] == "watch"
        request = parse_request(args[1:])
        assert request.shard == (index, replicas)
        assert request.root.startswith("s3://") and request.output_dir == "/results"


def test_pod_index_comes_from_the_pod_ordinal_label() -> None:
    """POD_INDEX is the apps.kubernetes.io/pod-index label, through the downward API."""
    env = {e["name"]: e for e in _container()["env"]}
    path = env["POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert path == "metadata.labels['apps.kubernetes.io/pod-index']"


def test_every_run_falls_in_exactly_one_pods_shard() -> None:
    """Whatever its path, a run is watched by exactly one replica."""
    replicas = _statefulset()["spec"]["replicas"]
    shards = [parse_request(_args_of_pod(i)[1:]).shard for i in range(replicas)]
    for name in [f"team-{t}/run-{r}" for t in range(5) for r in range(40)]:
        assert sum(in_shard(name, s) for s in shards) == 1, name


def test_probe_and_port_are_the_status_servers() -> None:
    """The liveness probe asks /healthz on the port --status-address serves."""
    container = _container()
    request = parse_request(_args_of_pod(0)[1:])
    assert request.status_address is not None
    (port,) = container["ports"]
    assert port["containerPort"] == request.status_address[1]
    probe = container["livenessProbe"]["httpGet"]
    assert probe == {"path": "/healthz", "port": port["name"]}
