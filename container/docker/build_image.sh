#!/bin/sh
# Build the evaluator image from the repository's Dockerfile and report its size.
#
#   container/docker/build_image.sh [--tag TAG] [--base IMAGE] [--no-standin] [-- DOCKER_BUILD_ARGS...]
#
# TAG defaults to debugger-rule-evaluator:latest (also tagged with the project's version).
# IMAGE (the Dockerfile's BASE_IMAGE) defaults to python:3.11-slim. When it is neither present
# locally nor pullable (no registry reachable), a stand-in is made from Debian packages with
# make_base_image.sh (root and debootstrap needed), unless --no-standin is given.
# The OCI labels get the version, the git revision and the build time. Never uses --pull.
# Environment: DOCKER (docker).
set -eu
cd "$(dirname "$0")/../.."
DOCKER=${DOCKER:-docker}
TAG=debugger-rule-evaluator:latest
BASE=python:3.11-slim
STANDIN=1
while [ $# -gt 0 ]; do
    case $1 in
        --tag) TAG=$2; shift 2 ;;
        --base) BASE=$2; shift 2 ;;
        --no-standin) STANDIN=0; shift ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --) shift; break ;;
        *) echo "build_image.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
say() { echo "build_image: $*" >&2; }
case ${TAG##*/} in
    *:*) REPO=${TAG%:*} ;;
    *) REPO=$TAG; TAG=$TAG:latest ;;
esac

$DOCKER info >/dev/null 2>&1 || { say "no Docker engine answers ($DOCKER info failed)"; exit 1; }

if ! $DOCKER image inspect "$BASE" >/dev/null 2>&1; then
    say "base image $BASE is not present; trying to pull it"
    if ! $DOCKER pull --quiet "$BASE" >/dev/null 2>&1; then
        [ "$STANDIN" = 1 ] || { say "cannot pull $BASE, and --no-standin was given"; exit 1; }
        say "cannot pull $BASE: making a local stand-in from Debian packages"
        container/docker/make_base_image.sh "$BASE"
    fi
fi

version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' pyproject.toml | head -n 1)
revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$revision" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    revision="$revision-dirty"
fi
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)

start=$(date +%s)
say "building $TAG on $BASE"
$DOCKER build --force-rm \
    --build-arg "BASE_IMAGE=$BASE" \
    --build-arg "VERSION=$version" \
    --build-arg "REVISION=$revision" \
    --build-arg "CREATED=$created" \
    --tag "$TAG" --tag "$REPO:$version" \
    "$@" .
seconds=$(( $(date +%s) - start ))
size=$($DOCKER image inspect --format '{{.Size}}' "$TAG")
mb=$(( (size + 500000) / 1000000 ))
say "built $TAG in $seconds s; image size $mb MB (target under 250 MB)"
