#!/usr/bin/env bash
# A real 1-node Apache Kafka (KRaft, broker+controller in one JVM) on
# 127.0.0.1, for bench's 1-broker target. scripts/kafka-cluster.sh always
# starts 3 nodes; this uses the same Maven-fetched jars (it runs that
# script's 'install' first) and the same broker logging.
#
# Usage: bench/scripts/kafka-single.sh up|down|bootstrap
#
# Environment:
#   KPROD_SINGLE_PORT   broker port (default 48092; the controller gets +100)
#   KPROD_SINGLE_STATE  data + logs + pidfile (default /tmp/kprod-bench-single)
#   KPROD_SINGLE_HEAP   JVM heap flags (default "-Xms1g -Xmx1g")
#   KPROD_CACHE, KPROD_KAFKA_VERSION as for scripts/kafka-cluster.sh
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
KAFKA_VERSION=${KPROD_KAFKA_VERSION:-4.4.0}
CACHE=${KPROD_CACHE:-$HOME/.cache/kprod/kafka-$KAFKA_VERSION}
PORT=${KPROD_SINGLE_PORT:-48092}
CPORT=$((PORT + 100))
STATE=${KPROD_SINGLE_STATE:-/tmp/kprod-bench-single}
HEAP=${KPROD_SINGLE_HEAP:--Xms1g -Xmx1g}
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java
CONF="$STATE/server.properties"
PIDFILE="$STATE/pid"

log() { printf 'kafka-single: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

pid() {
	local p
	[[ -f $PIDFILE ]] || return 0
	p=$(cat "$PIDFILE")
	if [[ -r /proc/$p/cmdline ]] && tr '\0' ' ' <"/proc/$p/cmdline" | grep -qF "kafka.Kafka $CONF"; then
		echo "$p"
	fi
}

cmd_up() {
	[[ -z $(pid) ]] || { log "already running (pid $(pid))"; echo "127.0.0.1:$PORT"; return 0; }
	bash "$REPO_ROOT/scripts/kafka-cluster.sh" install
	# Another engineer's cluster may listen here: the probe below would then
	# find *their* node 1 and report success, so refuse at once.
	local p
	for p in "$PORT" "$CPORT"; do
		if ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
			die "port $p is in use by another process (set KPROD_SINGLE_PORT)"
		fi
	done
	# Keep the kernel from handing these ports out as ephemeral ones.
	local f=/proc/sys/net/ipv4/ip_local_reserved_ports cur
	cur=$(cat "$f" 2>/dev/null || true)
	if [[ ",$cur," != *",$PORT,"* || ",$cur," != *",$CPORT,"* ]]; then
		{ echo "${cur:+$cur,}$PORT,$CPORT" >"$f"; } 2>/dev/null || true
	fi
	rm -rf "$STATE"
	mkdir -p "$STATE/data" "$STATE/logs"
	cat >"$CONF" <<CONF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$STATE/data
auto.create.topics.enable=true
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.hours=24
CONF
	local cid
	# No '-' in the id: at its start it reads as an option to kafka-storage
	# (scripts/kafka-cluster.sh says more).
	cid=-
	while [[ $cid == *-* ]]; do
		cid=$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
	done
	"$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 "-Dlog4j2.configurationFile=$REPO_ROOT/scripts/kafka/log4j2.xml" \
		"-Dkafka.logs.dir=$STATE/logs" -cp "$CACHE/libs/*" \
		kafka.tools.StorageTool format --config "$CONF" --cluster-id "$cid" >"$STATE/logs/format.log" 2>&1 ||
		{ cat "$STATE/logs/format.log" >&2; die "format failed"; }
	# shellcheck disable=SC2086
	setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$PIDFILE" \
		"$JAVA" $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
		-XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
		"-Dkafka.logs.dir=$STATE/logs" "-Dlog4j2.configurationFile=$REPO_ROOT/scripts/kafka/log4j2.xml" \
		-cp "$CACHE/libs/*" kafka.Kafka "$CONF" >"$STATE/logs/stdout.log" 2>&1 </dev/null &
	mkdir -p "$STATE/bin"
	(cd "$REPO_ROOT" && go build -o "$STATE/bin/waitkafka" ./internal/testcluster/cmd/waitkafka)
	sleep 1
	[[ -n $(pid) ]] || { tail -n 40 "$STATE/logs/server.log" >&2 || true; die "the broker exited at start"; }
	if ! "$STATE/bin/waitkafka" -brokers "127.0.0.1:$PORT" -expect 1 -timeout 120s -pids "$(pid)"; then
		tail -n 40 "$STATE/logs/server.log" >&2 || true
		cmd_down
		die "the broker did not come up"
	fi
	log "up: 127.0.0.1:$PORT (Kafka $KAFKA_VERSION, state $STATE)"
	echo "127.0.0.1:$PORT"
}

cmd_down() {
	local p
	p=$(pid)
	[[ -n $p ]] || { log "not running"; return 0; }
	kill -TERM "$p"
	for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
	kill -0 "$p" 2>/dev/null && kill -KILL "$p"
	rm -f "$PIDFILE"
	log "stopped (pid $p)"
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
bootstrap) echo "127.0.0.1:$PORT" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
