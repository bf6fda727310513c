# The rule evaluator image: a drop-in RuleEvaluatorImage for SageMaker Debugger rules, and the
# same `rule-evaluator` command for `docker run`, SDK local mode and Kubernetes (docs/container.md).
#
#   container/docker/build_image.sh                     # or, with docker alone:
#   docker build -t debugger-rule-evaluator --build-arg REVISION="$(git rev-parse --short=12 HEAD)" \
#       --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" .
#
# BASE_IMAGE is the official python:3.11-slim. Where no registry is reachable, make a local
# stand-in under that name first (container/docker/make_base_image.sh), or name another
# Python 3.11 image with --build-arg BASE_IMAGE=...; the Dockerfile needs only `python -m venv`
# and useradd there.
# Every Python package comes from container/docker/constraints.txt (exact versions;
# container/docker/update_constraints.sh regenerates it).
ARG BASE_IMAGE=python:3.11-slim

# ---- build: wheels of the pinned packages and of the project, installed into a venv ----
FROM ${BASE_IMAGE} AS build
# A package index mirror where PyPI is out of reach: build stage only, never in the image.
ARG PIP_INDEX_URL
ARG PIP_TRUSTED_HOST
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1

# The dependencies first, in layers of their own that are rebuilt only when the pins change:
# their wheels (and the build backend's), then the runtime venv from those wheels alone
# (--no-index: nothing but the pinned versions can be installed). The dependencies' test
# suites, type stubs and C sources leave it (about 20 MB, numpy's tests mostly), and so do
# data nothing here reads (about 25 MB): botocore's models of the AWS services other than S3
# and the credential chain's (STS, SSO, sign-in).
COPY container/docker/constraints.txt container/docker/build-constraints.txt /src/container/docker/
RUN python -m venv /build-venv \
 && /build-venv/bin/pip wheel --quiet --wheel-dir /wheels \
        --requirement /src/container/docker/constraints.txt \
        --requirement /src/container/docker/build-constraints.txt \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install --quiet --no-index --find-links /wheels \
        --requirement /src/container/docker/constraints.txt \
 && site=$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
 && find "$site" -type d -name tests -prune -exec rm -rf {} + \
 && find "$site/botocore/data" -mindepth 1 -maxdepth 1 -type d ! -name s3 ! -name sts \
        ! -name sso ! -name sso-oidc ! -name signin -exec rm -rf {} + \
 && find "$site" -type f \( -name '*.pyi' -o -name '*.pyx' -o -name '*.pxd' -o -name '*.c' \
        -o -name '*.cpp' -o -name '*.h' \) -delete \
 && /opt/venv/bin/python -m compileall -q -f --invalidation-mode unchecked-hash "$site"

# The project: its wheel (the build backend comes from /wheels too), installed without
# dependencies; `pip check` fails if pyproject.toml needs something the pins lack. pip and
# setuptools then leave the venv: nothing installs packages at run time.
COPY . /src
RUN /build-venv/bin/pip wheel --quiet --no-deps --no-index --find-links /wheels \
        --wheel-dir /wheels /src \
 && /opt/venv/bin/pip install --quiet --no-index --no-deps /wheels/debugger_rule_evaluator-*.whl \
 && /opt/venv/bin/pip check \
 && /opt/venv/bin/pip uninstall --quiet --yes pip setuptools \
 && site=$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
 && /opt/venv/bin/python -m compileall -q -f --invalidation-mode unchecked-hash \
        "$site/evaluator" "$site/rules_builtin" "$site/container" \
 && /opt/venv/bin/rule-evaluator --help >/dev/null

# ---- runtime: the base image, an unprivileged user and the venv ----
FROM ${BASE_IMAGE} AS runtime

# A fixed numeric uid/gid (Kubernetes' runAsNonRoot can check it), without a login shell or home.
RUN groupadd --system --gid 10001 evaluator \
 && useradd --system --uid 10001 --gid evaluator --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin evaluator

# Owned by root and read-only for the evaluator; nothing is written under / at run time, so the
# image runs with a read-only root file system. Nothing is shipped under /opt/ml: SageMaker
# mounts its config, inputs and outputs there.
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# SageMaker starts processing containers as root and creates /opt/ml's folders owned by root
# (aws/sagemaker-python-sdk#4764). So the image starts as root, and the command's supervisor
# gives the output folders to EVALUATOR_RUN_AS and runs the evaluation, rule code included, as
# that unprivileged user (container/privileges.py). Started with --user (docker run, SDK local
# mode, Kubernetes runAsUser/runAsNonRoot), it runs as that user and changes nothing.
ENV EVALUATOR_RUN_AS=10001:10001
# hadolint ignore=DL3002
USER 0:0

# Exec form: the command is PID 1 and receives SIGTERM (docker stop, Kubernetes) and SIGINT
# (SageMaker's StopProcessingJob) itself: it forwards them to the evaluation, reaps orphans
# (no --init needed) and exits 143 / 130 after Stopped is written.
# The console script runs container.cli:main, the same code path as `rule-evaluator` outside.
ENTRYPOINT ["/opt/venv/bin/rule-evaluator"]

# Last, so that a new revision or date only changes this metadata layer. The defaults are right
# for a plain `docker build`: VERSION is pyproject.toml's (tests/unit/container/test_dockerfile.py
# keeps them equal); a build cannot know its git revision and time by itself, so
# build_image.sh and the command in docs/container.md pass REVISION and CREATED.
ARG BASE_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE_URL=""
LABEL org.opencontainers.image.title="debugger-rule-evaluator" \
      org.opencontainers.image.description="Open-source rule evaluator for SageMaker Debugger (smdebug) training data: a drop-in RuleEvaluatorImage" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
