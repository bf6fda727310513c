#!/usr/bin/env bash
# Create bench/.work/venv-smdebug: the real smdebug 1.0.34, pinned by bench/smdebug-requirements.txt,
# installed beside (never inside) the project's venv.  Idempotent: a venv whose installed set
# already matches the requirements file is left alone.
#
#   bash bench/setup_smdebug.sh            # create or repair
#   bash bench/setup_smdebug.sh --force    # delete and recreate
#
# Env: SMDEBUG_PYTHON (default: python3.11, else python3) is the interpreter the venv is made from.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.work/venv-smdebug"
req="$here/smdebug-requirements.txt"
stamp="$venv/.bench-requirements.sha256"

if [[ "${1:-}" == "--force" ]]; then
    rm -rf "$venv"
fi

want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
   && "$venv/bin/python" -c "import smdebug.trials, smdebug.core.writer" 2>/dev/null; then
    echo "smdebug venv ready: $venv"
    exit 0
fi

py="${SMDEBUG_PYTHON:-}"
if [[ -z "$py" ]]; then
    if command -v python3.11 >/dev/null 2>&1; then py=python3.11; else py=python3; fi
fi

mkdir -p "$here/.work"
if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating $venv with $py ($("$py" --version 2>&1))"
    "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
# smdebug's generated *_pb2.py need protobuf 3.20.x; make sure the import really works.
"$venv/bin/python" -c "import smdebug, smdebug.trials, smdebug.core.writer; print('smdebug', smdebug.__version__)"
echo "$want" > "$stamp"
echo "smdebug venv ready: $venv"
