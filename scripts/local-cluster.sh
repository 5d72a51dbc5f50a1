#!/usr/bin/env bash
# A three-server Tributary cluster on this machine, for trying cluster mode: ZooKeeper from Debian's
# `zookeeper` package, one coordinator and three tablet servers, each with its own data dir under
# DIR, all sharing DIR/remote as remote.data.dir. Runs until Ctrl-C, then stops everything.
#
#   npm run cluster:local [-- DIR]          DIR defaults to ./local-cluster
#
# Ports: ZooKeeper 2181, coordinator 9123 (HTTP 8080), tablet servers 9124-9126.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="$(mkdir -p "${1:-local-cluster}" && cd "${1:-local-cluster}" && pwd)"
TRIBUTARY=(node "$ROOT/dist/cli/bin.cjs")
ZK_ADDRESS=127.0.0.1:2181

if ! dpkg -s zookeeper >/dev/null 2>&1; then
  echo "ZooKeeper is not installed: apt-get install -y zookeeper" >&2
  exit 1
fi
# The package's environment file names its jars.
CLASSPATH="$(. /etc/zookeeper/conf_example/environment && echo "$CLASSPATH")"
mkdir -p "$DIR/zookeeper/conf" "$DIR/zookeeper/data" "$DIR/remote" "$DIR/logs"
cat >"$DIR/zookeeper/conf/zoo.cfg" <<CFG
tickTime=2000
dataDir=$DIR/zookeeper/data
clientPort=2181
clientPortAddress=127.0.0.1
admin.enableServer=false
CFG

pids=()
stop_all() {
  # Tablet servers first (their controlled shutdown asks the coordinator to move leaderships), ZooKeeper last.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null && wait "${pids[i]}" 2>/dev/null || true; done
}
trap stop_all EXIT INT TERM

java -Xmx256m -cp "$DIR/zookeeper/conf:$CLASSPATH" org.apache.zookeeper.server.quorum.QuorumPeerMain "$DIR/zookeeper/conf/zoo.cfg" >"$DIR/logs/zookeeper.log" 2>&1 &
pids+=($!)
until echo srvr | (exec 3<>/dev/tcp/127.0.0.1/2181 && cat >&3 && cat <&3) 2>/dev/null | grep -q Mode; do sleep 0.5; done
echo "zookeeper     $ZK_ADDRESS"

common=(--set "zookeeper.address=$ZK_ADDRESS" --set "remote.data.dir=$DIR/remote" --set default.replication.factor=3)
# Each prints one `ready …` line once it serves; wait for it before the next.
start_server() {
  local name=$1
  shift
  local out="$DIR/logs/$name.out"
  "${TRIBUTARY[@]}" "$@" "${common[@]}" >"$out" 2>"$DIR/logs/$name.log" &
  pids+=($!)
  until grep -q '^ready' "$out" 2>/dev/null; do
    kill -0 "${pids[-1]}" 2>/dev/null || { echo "$name failed to start, see $DIR/logs/$name.log" >&2; exit 1; }
    sleep 0.2
  done
  printf '%-13s %s\n' "$name" "$(head -1 "$out")"
}
start_server coordinator coordinator-server --data-dir "$DIR/coordinator" --port 9123 --http-port 8080
for id in 0 1 2; do
  start_server "tablet-$id" tablet-server --data-dir "$DIR/tablet-$id" --port $((9124 + id)) --set "tablet-server.id=$id"
done
echo "cluster up: tributary sql --bootstrap 127.0.0.1:9123   (Ctrl-C stops it)"
wait
