#!/bin/sh
# Start a Docker engine by hand where no service manager does (CI machines, sandboxes, VMs
# without systemd), wait until it answers, and print the DOCKER_HOST value to use.
#
#   eval "$(container/docker/start_dockerd.sh [STATE_DIR])"     # sets DOCKER_HOST
#   kill "$(cat STATE_DIR/dockerd.pid)"                          # stops it
#
# STATE_DIR (default /var/lib/rule-evaluator-docker) holds the socket, the images and layers
# (so a later run reuses them), the daemon's log and its pid file. If an engine already
# answers on that socket it is reused, and nothing is started. Needs root and Debian's
# docker.io package (dockerd, containerd, runc); uses overlay2 and the default bridge.
set -eu
STATE=${1:-/var/lib/rule-evaluator-docker}
SOCK=unix://$STATE/docker.sock
say() { echo "start_dockerd: $*" >&2; }

answers() { DOCKER_HOST=$SOCK docker info >/dev/null 2>&1; }

if answers; then
    say "an engine already answers at $SOCK"
else
    command -v dockerd >/dev/null || { say "no dockerd: apt-get install docker.io"; exit 1; }
    [ "$(id -u)" = 0 ] || { say "needs root"; exit 1; }
    mkdir -p "$STATE"
    rm -f "$STATE/docker.sock"
    # setsid: the daemon outlives this script and gets no terminal signals meant for it
    setsid dockerd --host "$SOCK" --data-root "$STATE/data" --exec-root "$STATE/exec" \
        --pidfile "$STATE/dockerd.pid" --storage-driver overlay2 \
        >>"$STATE/dockerd.log" 2>&1 </dev/null &
    i=0
    until answers; do
        i=$((i + 1))
        if [ $i -ge 120 ]; then
            tail -n 30 "$STATE/dockerd.log" >&2
            say "the engine did not answer within 60 s (log: $STATE/dockerd.log)"
            exit 1
        fi
        sleep 0.5
    done
    say "engine $(DOCKER_HOST=$SOCK docker version --format '{{.Server.Version}}') answers at $SOCK (pid $(cat "$STATE/dockerd.pid"))"
fi
echo "export DOCKER_HOST=$SOCK"
