#!/bin/sh
# Make a local stand-in for the official python:3.11-slim image from Debian packages, for
# machines that reach Debian's package mirror (or a mirror of it) but no container registry.
#
#   sudo container/docker/make_base_image.sh [--force] [--no-host-ca] [TAG]
#
# TAG defaults to python:3.11-slim, so the project's Dockerfile builds unchanged on top of it.
# What the image holds: Debian bookworm (debootstrap --variant=minbase), Debian's Python 3.11
# with venv and ensurepip, ca-certificates, `python` and `python3` in /usr/local/bin, and
# LANG=C.UTF-8 as in the official image. It is not bit-for-bit the official image (Debian's
# 3.11.2 in /usr/bin instead of a /usr/local build, and no pip outside a venv), which is
# enough to build and test ours: the Dockerfile only needs `python -m venv`.
#
# Networks that intercept TLS: the host's extra CA certificates
# (/usr/local/share/ca-certificates/*.crt, or EXTRA_CA_DIR) are added to the image's trust
# store, so pip inside `docker build` can reach the package index. Images built on the stand-in
# inherit them; --no-host-ca leaves them out. Build release images from the official base.
#
# Environment: SUITE (bookworm), MIRROR (http://deb.debian.org/debian), SECURITY_MIRROR
# (http://deb.debian.org/debian-security), WORK (a fresh temporary folder, removed afterwards),
# DEBOOTSTRAP_CACHE (a folder kept between runs to save the package downloads), DOCKER (docker).
# Needs root (debootstrap, chroot) and a running Docker engine. Takes about a minute.
set -eu

SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}
EXTRA_CA_DIR=${EXTRA_CA_DIR:-/usr/local/share/ca-certificates}
DOCKER=${DOCKER:-docker}
TAG=python:3.11-slim
FORCE=0
HOST_CA=1
for arg in "$@"; do
    case $arg in
        --force) FORCE=1 ;;
        --no-host-ca) HOST_CA=0 ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "make_base_image.sh: unknown option $arg" >&2; exit 2 ;;
        *) TAG=$arg ;;
    esac
done

say() { echo "make_base_image: $*" >&2; }

if [ "$FORCE" = 0 ] && $DOCKER image inspect "$TAG" >/dev/null 2>&1; then
    say "$TAG already exists (use --force to make it again)"
    exit 0
fi
[ "$(id -u)" = 0 ] || { say "needs root (debootstrap and chroot)"; exit 1; }
command -v debootstrap >/dev/null || { say "needs debootstrap: apt-get install debootstrap"; exit 1; }
$DOCKER info >/dev/null 2>&1 || { say "no Docker engine answers ($DOCKER info failed)"; exit 1; }

OWN_WORK=0
if [ -z "${WORK:-}" ]; then
    WORK=$(mktemp -d /tmp/python-standin.XXXXXX)
    OWN_WORK=1
fi
ROOTFS=$WORK/rootfs
cleanup() {
    # a failed chroot step can leave /proc mounted inside the rootfs
    umount "$ROOTFS/proc" 2>/dev/null || true
    if [ "$OWN_WORK" = 1 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT INT TERM

start=$(date +%s)
say "debootstrap $SUITE from $MIRROR into $ROOTFS"
set -- --variant=minbase --include=python3,python3-venv,ca-certificates
if [ -n "${DEBOOTSTRAP_CACHE:-}" ]; then
    mkdir -p "$DEBOOTSTRAP_CACHE"
    set -- "$@" --cache-dir="$(cd "$DEBOOTSTRAP_CACHE" && pwd)"
fi
rm -rf "$ROOTFS"
debootstrap "$@" "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
    tail -n 30 "$WORK/debootstrap.log" >&2
    say "debootstrap failed"
    exit 1
}

cat >"$ROOTFS/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
EOF

# As Debian's own slim images: no documentation, manual pages or translations.
cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
find "$ROOTFS/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find "$ROOTFS/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "$ROOTFS/usr/share/man/"* "$ROOTFS/usr/share/info/"*
find "$ROOTFS/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} + 2>/dev/null || true

mkdir -p "$ROOTFS/usr/local/share/ca-certificates"
if [ "$HOST_CA" = 1 ] && ls "$EXTRA_CA_DIR"/*.crt >/dev/null 2>&1; then
    cp "$EXTRA_CA_DIR"/*.crt "$ROOTFS/usr/local/share/ca-certificates/"
    say "adding the host's extra CA certificates: $(cd "$EXTRA_CA_DIR" && echo *.crt)"
fi
chroot "$ROOTFS" /usr/sbin/update-ca-certificates >"$WORK/update-ca.log" 2>&1 || {
    cat "$WORK/update-ca.log" >&2
    say "update-ca-certificates failed"
    exit 1
}

# The official image's names: python and python3 in /usr/local/bin, first on PATH.
ln -sf /usr/bin/python3 "$ROOTFS/usr/local/bin/python3"
ln -sf /usr/bin/python3 "$ROOTFS/usr/local/bin/python"
# No EXTERNALLY-MANAGED marker, as in the official image (pip inside a venv ignores it anyway).
rm -f "$ROOTFS"/usr/lib/python3.*/EXTERNALLY-MANAGED

chroot "$ROOTFS" /usr/bin/apt-get clean
rm -rf "$ROOTFS/var/lib/apt/lists/"* "$ROOTFS/var/cache/apt/"*.bin "$ROOTFS/var/log/"*.log \
       "$ROOTFS/var/cache/debconf/"*-old "$ROOTFS/var/lib/dpkg/"*-old
find "$ROOTFS/usr/lib/python3"* -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null || true

version=$(chroot "$ROOTFS" /usr/bin/python3 -c 'import platform; print(platform.python_version())')
say "importing as $TAG (Python $version)"
tar -C "$ROOTFS" --numeric-owner -c . | $DOCKER import \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change "ENV PYTHON_VERSION=$version" \
    --change "LABEL debugger-rule-evaluator.base-standin=debootstrap-$SUITE-python-$version" \
    --change 'CMD ["python3"]' \
    - "$TAG" >/dev/null
$DOCKER run --rm "$TAG" python -c 'import ssl, venv, ensurepip, sys; print(sys.version)' >/dev/null
say "made $TAG in $(( $(date +%s) - start )) s: $($DOCKER image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')"
