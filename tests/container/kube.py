"""Play Kubernetes for a container of a manifest: read the YAML, and turn one container's
environment, volume mounts and security context into ``docker run`` options, so a test runs the
image exactly as the manifest would have it run (and cannot drift from it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Manifest", "PodContainer"]


@dataclass(frozen=True)
class PodContainer:
    """One container of a pod template, with the pod's security context and volumes."""

    spec: dict[str, Any]
    pod: dict[str, Any]

    @property
    def env(self) -> dict[str, str]:
        """The variables the manifest sets (``value`` entries; nothing else is used here)."""
        env = {}
        for entry in self.spec.get("env") or []:
            assert "value" in entry, f"only plain values are supported: {entry}"
            env[entry["name"]] = str(entry["value"])
        return env

    def volume(self, name: str) -> dict[str, Any]:
        return next(v for v in self.pod.get("volumes") or [] if v["name"] == name)

    def docker_options(self, host_folders: Mapping[str, Path]) -> list[str]:
        """``docker run`` options: the environment, each volume mount (from the host folder
        given for the volume's name), the user and the container's security settings."""
        options: list[str] = []
        for name, value in self.env.items():
            options += ["-e", f"{name}={value}"]
        for mount in self.spec.get("volumeMounts") or []:
            host = host_folders[mount["name"]].resolve()
            suffix = ":ro" if mount.get("readOnly") else ""
            options += ["-v", f"{host}:{mount['mountPath']}{suffix}"]
        pod_security = self.pod.get("securityContext") or {}
        security = self.spec.get("securityContext") or {}
        user = security.get("runAsUser", pod_security.get("runAsUser"))
        group = security.get("runAsGroup", pod_security.get("runAsGroup"))
        if user is not None:
            options += ["--user", f"{user}:{group if group is not None else user}"]
        if security.get("readOnlyRootFilesystem"):
            options.append("--read-only")
        if security.get("allowPrivilegeEscalation") is False:
            options += ["--security-opt", "no-new-privileges"]
        for capability in (security.get("capabilities") or {}).get("drop") or []:
            options += ["--cap-drop", capability]
        assert not self.spec.get("command"), "the image's entrypoint is the command"
        return options

    @property
    def args(self) -> list[str]:
        return [str(a) for a in self.spec.get("args") or []]


class Manifest:
    """The documents of one YAML file."""

    def __init__(self, path: Path) -> None:
        self.documents = [d for d in yaml.safe_load_all(path.read_text()) if d]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.documents if d.get("kind") == kind]

    def job(self) -> dict[str, Any]:
        (job,) = self.of_kind("Job")
        return job

    def container(self, name: str) -> PodContainer:
        pod = self.job()["spec"]["template"]["spec"]
        spec = next(c for c in pod["containers"] if c["name"] == name)
        return PodContainer(spec, pod)

    def config_map(self, name: str) -> dict[str, str]:
        found = next(d for d in self.of_kind("ConfigMap") if d["metadata"]["name"] == name)
        return {k: str(v) for k, v in found["data"].items()}
