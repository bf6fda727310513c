"""Regenerate the checked-in protobuf modules of ``evaluator/formats/proto``.

Run from anywhere; it works from the repository root so the generated imports read
``from evaluator.formats.proto import ..._pb2``::

    .venv/bin/python tools/gen_protos.py

It needs the ``dev`` extra (grpcio-tools, pinned in pyproject.toml: the protoc inside it decides
the gencode version, which the protobuf runtime checks at import).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTO_DIR = os.path.join("evaluator", "formats", "proto")


def main() -> int:
    protos = sorted(glob.glob(os.path.join(PROTO_DIR, "*.proto"), root_dir=ROOT))
    if not protos:
        print(f"no .proto files under {PROTO_DIR}", file=sys.stderr)
        return 1
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I", ".", "--python_out=.", "--pyi_out=."]
    print(" ".join(cmd + protos))
    return subprocess.call(cmd + protos, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
