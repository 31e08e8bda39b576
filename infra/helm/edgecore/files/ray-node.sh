#!/usr/bin/env bash
# One node of a vLLM multi-node group (LeaderWorkerSet): tensor parallel inside the node,
# pipeline stages across nodes, Ray as vLLM's executor.
#   leader: start the Ray head, wait until every node of the group has joined, exec vLLM ("$@")
#   worker: join the leader's Ray cluster and block
# LeaderWorkerSet sets LWS_GROUP_SIZE and LWS_LEADER_ADDRESS in every pod of a group.
set -euo pipefail

role="${1:?usage: ray-node.sh leader|worker [command...]}"
shift
port="${RAY_PORT:-6379}"
size="${LWS_GROUP_SIZE:?LWS_GROUP_SIZE is not set (not in a LeaderWorkerSet?)}"
timeout_s="${RAY_JOIN_TIMEOUT_S:-900}"

alive_nodes() {
    python3 - "$port" <<'PY' 2>/dev/null || echo 0
import sys

import ray

ray.init(address=f"127.0.0.1:{sys.argv[1]}", logging_level="ERROR")
print(sum(1 for node in ray.nodes() if node["Alive"]))
PY
}

case "$role" in
    leader)
        ray start --head --port="$port" --dashboard-host=127.0.0.1 --disable-usage-stats
        waited=0
        until [ "$(alive_nodes)" -ge "$size" ]; do
            if [ "$waited" -ge "$timeout_s" ]; then
                echo "ray-node: fewer than $size nodes joined in ${timeout_s}s" >&2
                exit 1  # LeaderWorkerSet recreates the whole group
            fi
            sleep 5
            waited=$((waited + 5))
        done
        echo "ray-node: $size nodes joined; starting vLLM" >&2
        exec "$@"
        ;;
    worker)
        leader="${LWS_LEADER_ADDRESS:?LWS_LEADER_ADDRESS is not set}"
        until ray health-check --address="$leader:$port" >/dev/null 2>&1; do
            sleep 2
        done
        exec ray start --address="$leader:$port" --block --disable-usage-stats
        ;;
    *)
        echo "ray-node: unknown role $role" >&2
        exit 2
        ;;
esac
