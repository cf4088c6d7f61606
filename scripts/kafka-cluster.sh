#!/usr/bin/env bash
# A real 3-node Apache Kafka cluster (KRaft, each node broker+controller) on
# 127.0.0.1, for kprod's integration tests. Kafka comes from Maven Central
# (the only place our machines can fetch it from), not from a tarball, so this
# script starts the JVMs itself instead of using Kafka's bin/ scripts.
#
# Usage: scripts/kafka-cluster.sh VERB [ARGS]
#   install      fetch the pinned Kafka jars (+ runtime deps) into the cache
#   up           start the 3 nodes from scratch (no-op if already up and healthy)
#   down         stop every node (SIGTERM, then SIGKILL after 10s)
#   status       one line per node; exit 0 only if all 3 are running
#   bootstrap    print 127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#   kill N       SIGKILL node N (N = 1..3, which is also its Kafka node.id)
#   pause N      SIGSTOP node N (it stays "connected" but answers nothing)
#   resume N     SIGCONT node N
#   restart N    start node N again (stopping it first if it runs) and wait
#                until it answers metadata and is registered
#   heal         if at least one node runs: resume paused nodes, start dead
#                ones (keeping their data), wait until all 3 answer; for when
#                a fault test died before undoing its faults
#   logs N [L]   print the last L (default 100) lines of node N's server.log
#
# Environment:
#   KPROD_KAFKA_PORT_BASE  broker port of node 1 (default 29092); node N
#                          listens on BASE+N-1 and its controller on BASE+100+N-1
#                          (the default keeps every port below Linux's
#                          ephemeral range, 32768 up, so that no outgoing
#                          connection can hold one when a node starts)
#   KPROD_STATE            data + logs + pidfiles (default /tmp/kprod-kafka)
#   KPROD_CACHE            where install puts the jars
#                          (default $HOME/.cache/kprod/kafka-$KAFKA_VERSION)
#   KPROD_KAFKA_VERSION    Kafka version to install/run (default 4.4.0)
#   KPROD_KAFKA_HEAP       JVM heap flags per node (default "-Xms512m -Xmx1g")
#   KPROD_KAFKA_UP_TIMEOUT seconds to wait for the cluster (default 120)
#   KPROD_KAFKA_SECURITY   1 adds three secured listeners to every node
#                          (default 0; scripts/test.sh sets 1):
#                            SASL_PLAINTEXT on BASE+10+N-1 (PLAIN, SCRAM-SHA-256,
#                              SCRAM-SHA-512, OAUTHBEARER)
#                            SSL            on BASE+20+N-1 (mutual TLS: a client
#                              certificate is required)
#                            SASL_SSL       on BASE+30+N-1 (PLAIN, SCRAM-SHA-512,
#                              OAUTHBEARER; no client certificate)
#                          'up' makes a CA, a broker certificate for 127.0.0.1 and
#                          localhost, and client certificates in $KPROD_STATE/tls;
#                          users are in sec_users below (SCRAM ones made at format
#                          time). Inter-broker and controller traffic stays on
#                          PLAINTEXT. SASL sessions last 15s
#                          (connections.max.reauth.ms) so that clients must
#                          re-authenticate (KIP-368) within a test's time.
#
# Notes: 'up' wipes the data of a cluster that is not fully healthy. There is
# one cluster per KPROD_STATE and port base on the machine: two concurrent
# runs of scripts/test.sh with the same settings stop each other's cluster, so
# give a second one its own KPROD_STATE and KPROD_KAFKA_PORT_BASE.
set -euo pipefail

KAFKA_VERSION=${KPROD_KAFKA_VERSION:-4.4.0}
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
SUPPORT_DIR="$SCRIPT_DIR/kafka"
CACHE=${KPROD_CACHE:-$HOME/.cache/kprod/kafka-$KAFKA_VERSION}
STATE=${KPROD_STATE:-/tmp/kprod-kafka}
PORT_BASE=${KPROD_KAFKA_PORT_BASE:-29092}
CTRL_BASE=$((PORT_BASE + 100))
HEAP=${KPROD_KAFKA_HEAP:--Xms512m -Xmx1g}
UP_TIMEOUT=${KPROD_KAFKA_UP_TIMEOUT:-120}
SECURITY=${KPROD_KAFKA_SECURITY:-0}
[[ $SECURITY == 1 ]] || SECURITY=0
NODES=(1 2 3)
TLS_DIR="$STATE/tls"
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java
PROBE="$STATE/bin/kprod-waitkafka"

log() { printf 'kafka-cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

broker_port() { echo $((PORT_BASE + $1 - 1)); }
ctrl_port() { echo $((CTRL_BASE + $1 - 1)); }
sasl_plaintext_port() { echo $((PORT_BASE + 10 + $1 - 1)); }
ssl_port() { echo $((PORT_BASE + 20 + $1 - 1)); }
sasl_ssl_port() { echo $((PORT_BASE + 30 + $1 - 1)); }

# node_ports N: every port node N listens on.
node_ports() {
	echo "$(broker_port "$1") $(ctrl_port "$1")"
	if ((SECURITY)); then
		echo "$(sasl_plaintext_port "$1") $(ssl_port "$1") $(sasl_ssl_port "$1")"
	fi
}

# all_ports: every port of every node.
all_ports() {
	local n
	for n in "${NODES[@]}"; do node_ports "$n"; done | tr ' ' '\n' | sort -n
}

# The test users of the secured listeners. internal/testcluster has the same
# names and passwords (SecurityUser, SecurityPassword, ...): change both.
SEC_USER=kprod
SEC_PASSWORD=kprod-Pa55-3f9c
SEC_KEY_PASSWORD=kprod-keypass-71d2
node_dir() { echo "$STATE/node$1"; }
node_conf() { echo "$STATE/node$1/server.properties"; }
node_pidfile() { echo "$STATE/node$1/pid"; }
node_log() { echo "$STATE/node$1/logs/server.log"; }

bootstrap() {
	local n out=()
	for n in "${NODES[@]}"; do out+=("127.0.0.1:$(broker_port "$n")"); done
	(IFS=,; echo "${out[*]}")
}

check_node_arg() {
	[[ ${1:-} =~ ^[1-3]$ ]] || die "node must be 1, 2 or 3 (got '${1:-}')"
}

# ---------------------------------------------------------------- install --

installed() { [[ -f "$CACHE/.complete" && "$(cat "$CACHE/.complete")" == "$KAFKA_VERSION" ]]; }

# ensure_tools [maven]: java and javac, and maven when asked (only an
# install fetches jars with it).
ensure_tools() {
	local missing=()
	# The JDK, not only a runtime: the compatibility tests compile Java
	# programs (internal/javacompat) with the javac they find the way this
	# script finds java: $JAVA_HOME/bin if set, else PATH.
	if ! command -v "$JAVA" >/dev/null 2>&1 || ! command -v "${JAVA_HOME:+$JAVA_HOME/bin/}javac" >/dev/null 2>&1; then
		missing+=(openjdk-17-jdk-headless)
	fi
	if [[ ${1:-} == maven ]] && ! command -v mvn >/dev/null 2>&1; then
		missing+=(maven)
	fi
	((${#missing[@]} == 0)) && return 0
	if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
		log "installing ${missing[*]} with apt-get"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	else
		die "need ${missing[*]} (java and javac 17+, and maven) on PATH"
	fi
}

cmd_install() {
	ensure_tools
	if installed; then
		log "Kafka $KAFKA_VERSION already installed in $CACHE"
		return 0
	fi
	ensure_tools maven
	mkdir -p "$(dirname "$CACHE")"
	exec 8>"$CACHE.lock"
	flock -w 600 8 || die "another install holds $CACHE.lock"
	if installed; then # another install finished while we waited
		log "Kafka $KAFKA_VERSION already installed in $CACHE"
		return 0
	fi
	local tmp="$CACHE.tmp.$$"
	rm -rf "$tmp"
	mkdir -p "$tmp/libs"
	log "fetching Kafka $KAFKA_VERSION and its runtime dependencies with mvn into $CACHE"
	if ! mvn -q -B -f "$SUPPORT_DIR/pom.xml" -Dkafka.version="$KAFKA_VERSION" \
		dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory="$tmp/libs" >"$tmp/mvn.log" 2>&1; then
		cat "$tmp/mvn.log" >&2
		rm -rf "$tmp"
		die "mvn could not resolve Kafka $KAFKA_VERSION (set KPROD_KAFKA_VERSION to another 4.x release)"
	fi
	[[ -f "$tmp/libs/kafka_2.13-$KAFKA_VERSION.jar" ]] || die "kafka_2.13-$KAFKA_VERSION.jar missing after mvn"
	rm -f "$tmp/mvn.log"
	echo "$KAFKA_VERSION" >"$tmp/.complete"
	rm -rf "$CACHE"
	mv "$tmp" "$CACHE"
	log "installed Kafka $KAFKA_VERSION ($(ls "$CACHE/libs" | wc -l) jars) in $CACHE"
}

# -------------------------------------------------------------- processes --

# node_pid N: prints node N's pid if that process is alive and really is
# node N of this state dir; prints nothing otherwise.
node_pid() {
	local pf pid
	pf=$(node_pidfile "$1")
	[[ -f $pf ]] || return 0
	pid=$(cat "$pf" 2>/dev/null || true)
	[[ $pid =~ ^[0-9]+$ ]] || return 0
	if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "kafka.Kafka $(node_conf "$1")"; then
		echo "$pid"
	fi
}

node_paused() { # pid
	local st
	st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)
	[[ $st == T || $st == t ]]
}

# stray_pids: every java of this state dir, with or without a pidfile.
stray_pids() {
	pgrep -f "kafka\.Kafka ${STATE}/node[0-9]+/server\.properties" || true
}

# port_holders P: the TCP states (hex, as in /proc/net/tcp) of the sockets
# bound to local port P that would keep a node from binding it: listening
# (0A), or a live connection (01-03) such as an outgoing one that got P as its
# ephemeral port. Closing states are left out: the JVM binds with SO_REUSEADDR.
port_holders() {
	local hex
	hex=$(printf '%04X' "$1")
	awk -v h=":$hex" 'FNR > 1 && substr($2, length($2) - 4) == h && ($4 == "0A" || $4 == "01" || $4 == "02" || $4 == "03") { print $4 }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null || true
}

# wait_ports_free P...: fail at once if a process listens on a port; wait (up
# to 30s) for connections that hold one to end.
wait_ports_free() {
	local p st deadline=$((SECONDS + 30)) busy
	while :; do
		busy=()
		for p in "$@"; do
			st=$(port_holders "$p")
			[[ $st == *0A* ]] && die "port $p is in use by another process (set KPROD_KAFKA_PORT_BASE to move the cluster)"
			[[ -n $st ]] && busy+=("$p")
		done
		((${#busy[@]} == 0)) && return 0
		((SECONDS >= deadline)) && die "ports ${busy[*]} still held by connections after 30s (set KPROD_KAFKA_PORT_BASE to move the cluster)"
		sleep 0.5
	done
}

# reserve_ports: the default ports lie inside Linux's ephemeral port range, so
# any outgoing connection on the machine (the brokers' own, the tests') may get
# one of them as its local port, and a node that starts or restarts then fails
# with "Address already in use". Reserving them (net.ipv4.ip_local_reserved_ports,
# per network namespace, root only) stops the kernel from handing them out.
reserve_ports() {
	local f=/proc/sys/net/ipv4/ip_local_reserved_ports range lo hi cur want
	local ports p inrange=0
	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || return 0
	ports=$(all_ports)
	for p in $ports; do ((p >= lo && p <= hi)) && inrange=1; done
	((inrange)) || return 0 # outside the ephemeral range: nothing to do
	# Each node's ports of one kind are consecutive: reserve them as ranges.
	want=$(for p in $ports; do echo "$p"; done | awk 'NR == 1 { a = b = $1; next }
		$1 == b + 1 { b = $1; next } { printf "%s%s-%s", sep, a, b; sep = ","; a = b = $1 }
		END { printf "%s%s-%s\n", sep, a, b }')
	cur=$(cat "$f" 2>/dev/null || true)
	if [[ -n $cur ]] && all_reserved "$cur"; then return 0; fi
	range=${cur:+$cur,}$want
	if ! { echo "$range" >"$f"; } 2>/dev/null; then
		log "warning: could not reserve ports $want (not root?); a node may fail to bind one" \
			"that an outgoing connection took. A KPROD_KAFKA_PORT_BASE below $lo avoids this."
	fi
}

all_reserved() { # reserved-list
	local p item a b ok
	for p in $(all_ports); do
		ok=0
		for item in ${1//,/ }; do
			a=${item%-*} b=${item#*-}
			((p >= a && p <= b)) && { ok=1; break; }
		done
		((ok)) || return 1
	done
}

# wait_listening T P...: wait up to T seconds until something listens on
# every port P.
wait_listening() {
	local deadline=$((SECONDS + $1)) p missing
	shift
	while :; do
		missing=()
		for p in "$@"; do [[ $(port_holders "$p") == *0A* ]] || missing+=("$p"); done
		((${#missing[@]} == 0)) && return 0
		((SECONDS >= deadline)) && { log "nothing listens on ${missing[*]}"; return 1; }
		sleep 0.2
	done
}

wait_gone() { # timeout_s pid...
	local deadline=$((SECONDS + $1)) p alive
	shift
	while :; do
		alive=()
		for p in "$@"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
		((${#alive[@]} == 0)) && return 0
		((SECONDS >= deadline)) && { echo "${alive[*]}"; return 1; }
		sleep 0.2
	done
}

stop_pids() { # grace_s pid...
	local grace=$1 left
	shift
	(($# == 0)) && return 0
	kill -CONT "$@" 2>/dev/null || true # a paused JVM cannot act on SIGTERM
	kill -TERM "$@" 2>/dev/null || true
	if ! left=$(wait_gone "$grace" "$@"); then
		log "SIGKILL after ${grace}s: $left"
		# shellcheck disable=SC2086
		kill -KILL $left 2>/dev/null || true
		wait_gone 10 $left >/dev/null || die "could not kill $left"
	fi
}

java_opts() { # node
	local logs
	logs="$(node_dir "$1")/logs"
	# shellcheck disable=SC2206
	JOPTS=($HEAP
		-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
		-XX:+ExplicitGCInvokesConcurrent -XX:ParallelGCThreads=2 -XX:ConcGCThreads=1
		-XX:CICompilerCount=2 -XX:+ExitOnOutOfMemoryError
		"-Xlog:gc*:file=$logs/gc.log:time,tags:filecount=2,filesize=10M"
		-Djava.awt.headless=true
		"-Dkafka.logs.dir=$logs"
		"-Dlog4j2.configurationFile=$SUPPORT_DIR/log4j2.xml"
		-cp "$CACHE/libs/*")
}

write_config() { # node cluster_voters
	local n=$1 dir
	dir=$(node_dir "$n")
	cat >"$(node_conf "$n")" <<EOF
# Generated by scripts/kafka-cluster.sh; rewritten on every 'up'.
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$2
listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n"),CONTROLLER://127.0.0.1:$(ctrl_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data

# Topic defaults for tests. num.partitions stays at Kafka's default (1);
# min.insync.replicas stays 1: tests that need 2 set it on their own topics.
auto.create.topics.enable=true
num.partitions=1
default.replication.factor=3
min.insync.replicas=1
offsets.topic.replication.factor=3
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
# Tests delete the topics of those that passed; a deleted partition's files
# go at once instead of after a minute (a restarted node would load them).
file.delete.delay.ms=1000
# Look for transactions open longer than their transaction.timeout.ms every
# second instead of every 10s: the timeout tests wait for that abort.
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000

# Faster failure detection than the defaults (9s / 2s / 30s) so fault tests
# do not idle, yet loose enough for a loaded 2-core machine.
broker.session.timeout.ms=6000
broker.heartbeat.interval.ms=1000
replica.lag.time.max.ms=10000

# Three JVMs share two cores.
num.network.threads=2
num.io.threads=4
num.replica.fetchers=1
background.threads=4
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
log.retention.hours=24
EOF
	((SECURITY)) && write_security_config "$n"
	return 0
}

# write_security_config N: the secured listeners (see KPROD_KAFKA_SECURITY).
# Properties given twice keep their last value, so these replace the
# PLAINTEXT-only listeners above.
write_security_config() {
	local n=$1 l mechs plain scram oauth validator
	plain="org.apache.kafka.common.security.plain.PlainLoginModule required user_$SEC_USER=\"$SEC_PASSWORD\";"
	scram="org.apache.kafka.common.security.scram.ScramLoginModule required;"
	oauth='org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="kafka";'
	validator=org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler
	cat >>"$(node_conf "$n")" <<EOF

# Secured listeners for kprod's security tests (KPROD_KAFKA_SECURITY=1).
listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n"),CONTROLLER://127.0.0.1:$(ctrl_port "$n"),SASL_PLAINTEXT://127.0.0.1:$(sasl_plaintext_port "$n"),SSL://127.0.0.1:$(ssl_port "$n"),SASL_SSL://127.0.0.1:$(sasl_ssl_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n"),SASL_PLAINTEXT://127.0.0.1:$(sasl_plaintext_port "$n"),SSL://127.0.0.1:$(ssl_port "$n"),SASL_SSL://127.0.0.1:$(sasl_ssl_port "$n")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL
ssl.keystore.type=PEM
ssl.keystore.location=$TLS_DIR/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$TLS_DIR/ca.pem
listener.name.ssl.ssl.client.auth=required
# Short SASL sessions: clients must re-authenticate (KIP-368) during tests.
connections.max.reauth.ms=15000
EOF
	for l in sasl_plaintext sasl_ssl; do
		mechs=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
		# SASL_SSL leaves SCRAM-SHA-256 out, so that a test can meet
		# UNSUPPORTED_SASL_MECHANISM.
		[[ $l == sasl_ssl ]] && mechs=PLAIN,SCRAM-SHA-512,OAUTHBEARER
		cat >>"$(node_conf "$n")" <<EOF
listener.name.$l.sasl.enabled.mechanisms=$mechs
listener.name.$l.plain.sasl.jaas.config=$plain
listener.name.$l.scram-sha-256.sasl.jaas.config=$scram
listener.name.$l.scram-sha-512.sasl.jaas.config=$scram
listener.name.$l.oauthbearer.sasl.jaas.config=$oauth
listener.name.$l.oauthbearer.sasl.server.callback.handler.class=$validator
EOF
	done
}

# make_certs: a CA, a broker certificate valid for 127.0.0.1 and localhost,
# and a client certificate for mutual TLS (its key also PBES2-encrypted, for
# ssl.key.password), in $TLS_DIR. Made afresh on every 'up' that formats.
make_certs() {
	if ! command -v openssl >/dev/null 2>&1 && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
		log "installing openssl with apt-get"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null || true
	fi
	command -v openssl >/dev/null 2>&1 || die "need openssl for KPROD_KAFKA_SECURITY=1"
	rm -rf "$TLS_DIR"
	mkdir -p "$TLS_DIR"
	# Run as a job and waited for: on the left of || bash would ignore
	# set -e inside the subshell, and only the last step would count.
	(
		set -e
		cd "$TLS_DIR"
		ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
		openssl req -x509 "${ec[@]}" -keyout ca-key.pem -out ca.pem -days 3650 -subj "/CN=kprod test CA" \
			-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
		sign() { # name subject extensions
			openssl req "${ec[@]}" -keyout "$1-key.pem" -out "$1.csr" -subj "$2"
			printf '%s\n' "$3" >"$1.ext"
			openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
				-out "$1.pem" -days 3650 -extfile "$1.ext"
			rm -f "$1.csr" "$1.ext"
		}
		sign broker /CN=localhost "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
		sign client /CN=kprod-client "extendedKeyUsage=clientAuth"
		# Java's PEM key store: the private key, then the certificate chain.
		cat broker-key.pem broker.pem >broker-keystore.pem
		cat client-key.pem client.pem >client-keystore.pem
		openssl pkcs8 -topk8 -v2 aes-256-cbc -in client-key.pem -out client-key-encrypted.pem \
			-passout "pass:$SEC_KEY_PASSWORD"
	) >"$STATE/certs.log" 2>&1 &
	local f status=0
	wait $! || status=$?
	# And every file there: set -e does not hold in a subshell started
	# where bash ignores it (a caller's if, && or ||).
	for f in ca.pem broker.pem broker-keystore.pem client.pem client-keystore.pem client-key-encrypted.pem; do
		[[ -s $TLS_DIR/$f ]] || status=1
	done
	((status == 0)) || { cat "$STATE/certs.log" >&2; die "making test certificates failed"; }
}

start_node() { # node
	local n=$1 dir
	dir=$(node_dir "$n")
	java_opts "$n"
	mkdir -p "$dir/logs"
	# setsid: the node must outlive this script and ignore ^C aimed at it.
	setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$(node_pidfile "$n")" \
		"$JAVA" "${JOPTS[@]}" kafka.Kafka "$(node_conf "$n")" \
		>"$dir/logs/stdout.log" 2>&1 </dev/null 8>&- 9>&- &
	local i
	for i in $(seq 200); do [[ -s $(node_pidfile "$n") ]] && break; sleep 0.05; done
}

# build_probe: compile the Go readiness check (internal/testcluster/cmd/waitkafka).
build_probe() {
	mkdir -p "$STATE/bin"
	(cd "$REPO_ROOT" && go build -o "$PROBE" ./internal/testcluster/cmd/waitkafka)
}

tail_logs() {
	local n
	for n in "${NODES[@]}"; do
		log "---- last 30 lines of node $n: $(node_log "$n")"
		tail -n 30 "$(node_log "$n")" 2>/dev/null >&2 || true
		tail -n 10 "$(node_dir "$n")/logs/stdout.log" 2>/dev/null >&2 || true
	done
}

live_pids() {
	local n p out=()
	for n in "${NODES[@]}"; do
		p=$(node_pid "$n")
		[[ -n $p ]] && out+=("$p")
	done
	echo "${out[*]}"
}

# ------------------------------------------------------------------ verbs --

# lock_state serializes the verbs that start or stop nodes (up, down,
# restart, heal) on $STATE/.up.lock, held until the script exits: a 'down'
# waits for a restart or heal under way (a test's, say, whose test binary
# was killed) instead of racing it and leaving its new JVM running.
lock_state() {
	mkdir -p "$STATE"
	exec 9>"$STATE/.up.lock"
	flock -w 300 9 || die "another verb holds $STATE/.up.lock (up, down, restart or heal)"
}

# refuse_after_down: restart and heal do nothing once 'down' has run (it
# leaves $STATE/.down, which 'up' removes), so that one started before a
# 'down' and run after it does not bring back a node.
refuse_after_down() {
	[[ ! -e $STATE/.down ]] || die "the cluster was stopped ('down'); run '$0 up'"
}

cmd_up() {
	cmd_install
	mkdir -p "$STATE"
	# Lock fds 8 and 9 are closed in the nodes (start_node), or a running
	# JVM would hold the lock forever.
	lock_state
	rm -f "$STATE/.down"

	local n p pids=() all=1
	for n in "${NODES[@]}"; do
		p=$(node_pid "$n")
		if [[ -z $p ]]; then all=0; else pids+=("$p"); fi
	done
	# A cluster started with the other KPROD_KAFKA_SECURITY lacks (or has)
	# the secured listeners: start afresh.
	if ((all)) && [[ $(cat "$STATE/security" 2>/dev/null) != "$SECURITY" ]]; then
		log "the running cluster has KPROD_KAFKA_SECURITY=$(cat "$STATE/security" 2>/dev/null || echo 0), not $SECURITY; starting from scratch"
		all=0
	fi
	if ((all)); then
		build_probe
		if "$PROBE" -brokers "$(bootstrap)" -expect 1,2,3 -timeout 10s -quiet; then
			log "already up: $(bootstrap)"
			bootstrap
			return 0
		fi
		log "cluster processes run but it is not healthy; starting from scratch"
	fi

	# Clean up after a crash or a half-started cluster: its data is about to
	# be wiped, so there is nothing to shut down gracefully.
	local strays
	# shellcheck disable=SC2086
	strays=$(printf '%s\n' ${pids[@]+"${pids[@]}"} $(stray_pids) | sort -u)
	if [[ -n $strays ]]; then
		log "killing leftover nodes: $(echo $strays)"
		# shellcheck disable=SC2086
		kill -KILL $strays 2>/dev/null || true
		# shellcheck disable=SC2086
		wait_gone 10 $strays >/dev/null || die "could not kill $strays"
	fi

	reserve_ports
	# shellcheck disable=SC2046
	wait_ports_free $(all_ports)

	local t0=$SECONDS
	# The Go check compiles while the JVMs start.
	build_probe >"$STATE/probe-build.log" 2>&1 &
	local build_pid=$!

	local voters=() cid
	for n in "${NODES[@]}"; do
		rm -rf "$(node_dir "$n")"
		mkdir -p "$(node_dir "$n")/data" "$(node_dir "$n")/logs"
		voters+=("$n@127.0.0.1:$(ctrl_port "$n")")
	done
	# A Kafka cluster id is a base64url (no padding) 16-byte UUID. One that
	# starts with '-' reads as an option to kafka-storage's argument parser
	# ("--cluster-id: expected one argument"); Kafka's Uuid.randomUuid draws
	# again when the id has a '-' at all, and so does this.
	cid=-
	while [[ $cid == *-* ]]; do
		cid=$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
	done
	echo "$cid" >"$STATE/cluster-id"
	echo "$SECURITY" >"$STATE/security"

	local scram=()
	if ((SECURITY)); then
		make_certs
		scram=(--add-scram "SCRAM-SHA-256=[name=$SEC_USER,password=$SEC_PASSWORD]"
			--add-scram "SCRAM-SHA-512=[name=$SEC_USER,password=$SEC_PASSWORD]")
	fi

	local fpids=()
	for n in "${NODES[@]}"; do
		write_config "$n" "$(IFS=,; echo "${voters[*]}")"
		"$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 "-Dlog4j2.configurationFile=$SUPPORT_DIR/log4j2.xml" \
			"-Dkafka.logs.dir=$(node_dir "$n")/logs" -cp "$CACHE/libs/*" \
			kafka.tools.StorageTool format --config "$(node_conf "$n")" --cluster-id "$cid" \
			${scram[@]+"${scram[@]}"} >"$(node_dir "$n")/logs/format.log" 2>&1 &
		fpids+=($!)
	done
	for n in "${NODES[@]}"; do
		if ! wait "${fpids[$((n - 1))]}"; then
			cat "$(node_dir "$n")/logs/format.log" >&2
			die "formatting node $n failed"
		fi
	done

	log "formatted storage in $((SECONDS - t0))s; starting 3 JVMs"
	for n in "${NODES[@]}"; do start_node "$n"; done
	if ! wait "$build_pid"; then
		cat "$STATE/probe-build.log" >&2
		cmd_down
		die "could not build the Go readiness check"
	fi

	log "waiting (up to ${UP_TIMEOUT}s) for 3 brokers on $(bootstrap)"
	if ! "$PROBE" -brokers "$(bootstrap)" -expect 1,2,3 -timeout "${UP_TIMEOUT}s" -pids "$(live_pids | tr ' ' ,)"; then
		tail_logs
		cmd_down
		die "cluster did not come up"
	fi
	if ((SECURITY)) && ! wait_listening 30 $(all_ports); then
		tail_logs
		cmd_down
		die "the secured listeners did not open"
	fi
	log "up in $((SECONDS - t0))s: $(bootstrap) (Kafka $KAFKA_VERSION, cluster id $cid)"
	log "logs: $STATE/node{1,2,3}/logs/server.log"
	bootstrap
}

cmd_down() {
	local pids strays
	lock_state
	touch "$STATE/.down"
	pids=$(live_pids)
	strays=$(stray_pids)
	# shellcheck disable=SC2086
	set -- $(printf '%s\n' $pids $strays | sort -u)
	if (($# == 0)); then
		log "no node running"
	else
		# The last node standing can spend long in a graceful shutdown that
		# needs a controller quorum; its data is wiped by the next up anyway.
		stop_pids 10 "$@"
		log "stopped $# node(s)"
	fi
	local n
	for n in "${NODES[@]}"; do rm -f "$(node_pidfile "$n")"; done
	strays=$(stray_pids)
	[[ -z $strays ]] || die "still running: $strays"
}

cmd_status() {
	local n p st ok=0
	for n in "${NODES[@]}"; do
		p=$(node_pid "$n")
		if [[ -z $p ]]; then
			st=stopped
		elif node_paused "$p"; then
			st="paused  pid $p"
		else
			st="running pid $p"
			ok=$((ok + 1))
		fi
		printf 'node %d: %-20s broker 127.0.0.1:%d controller 127.0.0.1:%d\n' \
			"$n" "$st" "$(broker_port "$n")" "$(ctrl_port "$n")"
		if [[ $(cat "$STATE/security" 2>/dev/null) == 1 ]]; then
			printf '        %-20s sasl_plaintext :%d ssl :%d sasl_ssl :%d\n' \
				"" "$(sasl_plaintext_port "$n")" "$(ssl_port "$n")" "$(sasl_ssl_port "$n")"
		fi
	done
	echo "state: $STATE  logs: $STATE/nodeN/logs/server.log"
	((ok == ${#NODES[@]}))
}

cmd_kill() {
	check_node_arg "${1:-}"
	local p
	p=$(node_pid "$1")
	[[ -n $p ]] || { log "node $1 is not running"; return 0; }
	kill -KILL "$p"
	wait_gone 10 "$p" >/dev/null || die "node $1 (pid $p) survived SIGKILL"
	rm -f "$(node_pidfile "$1")"
	log "killed node $1 (pid $p)"
}

cmd_signal() { # SIG verb node
	check_node_arg "${3:-}"
	local p
	p=$(node_pid "$3")
	[[ -n $p ]] || die "node $3 is not running"
	kill -"$1" "$p"
	# kill returns once the signal is sent, not once every thread has
	# stopped: a test that pauses a node and then expects silence must not
	# race the JVM's last running thread.
	[[ $1 != STOP ]] || wait_stopped "$p" || die "node $3 (pid $p) did not stop within 5s of SIGSTOP"
	log "$2 node $3 (pid $p)"
}

wait_stopped() { # pid: every thread of pid is in the stopped state
	local i f st busy
	for i in $(seq 100); do
		busy=0
		for f in /proc/"$1"/task/*/stat; do
			# The state follows "(comm) ", and a thread's comm may hold
			# spaces ("Signal Dispatch").
			st=$(sed 's/.*) //' "$f" 2>/dev/null | cut -c1 || true)
			[[ -z $st || $st == T || $st == t ]] || { busy=1; break; }
		done
		((busy)) || return 0
		sleep 0.05
	done
	return 1
}

cmd_restart() {
	check_node_arg "${1:-}"
	local n=$1 p
	[[ -f $(node_conf "$n") ]] || die "node $n was never set up; run '$0 up'"
	lock_state
	refuse_after_down
	[[ -x $PROBE ]] || build_probe
	p=$(node_pid "$n")
	if [[ -n $p ]]; then
		log "node $n is running (pid $p); stopping it first"
		stop_pids 20 "$p"
	fi
	reserve_ports
	# shellcheck disable=SC2046
	wait_ports_free $(node_ports "$n")
	start_node "$n"
	p=$(node_pid "$n")
	[[ -n $p ]] || { tail_logs; die "node $n did not start"; }
	if ! "$PROBE" -brokers "127.0.0.1:$(broker_port "$n")" -expect "$n" -timeout "${UP_TIMEOUT}s" -pids "$p"; then
		tail -n 50 "$(node_log "$n")" >&2 || true
		die "node $n did not come back"
	fi
	log "restarted node $n (pid $p)"
}

# heal: bring back whatever is broken without losing data: resume paused
# nodes, start dead ones, then wait for all three. Used by tests after a
# fault test died before undoing its faults.
cmd_heal() {
	local n p fixed=0
	[[ -f $(node_conf 1) ]] || die "no cluster in $STATE; run '$0 up'"
	lock_state
	refuse_after_down
	[[ -n $(live_pids) ]] || die "the cluster is down (no node runs); run '$0 up'"
	[[ -x $PROBE ]] || build_probe
	reserve_ports
	for n in "${NODES[@]}"; do
		p=$(node_pid "$n")
		if [[ -z $p ]]; then
			# shellcheck disable=SC2046
	wait_ports_free $(node_ports "$n")
			start_node "$n"
			log "started node $n (pid $(node_pid "$n"))"
			fixed=1
		elif node_paused "$p"; then
			kill -CONT "$p"
			log "resumed node $n (pid $p)"
			fixed=1
		fi
	done
	if ! "$PROBE" -brokers "$(bootstrap)" -expect 1,2,3 -timeout "${UP_TIMEOUT}s" -pids "$(live_pids | tr ' ' ,)"; then
		tail_logs
		die "cluster did not recover"
	fi
	((fixed)) && log "healed" || log "all nodes were fine"
}

cmd_logs() {
	check_node_arg "${1:-}"
	local f
	f=$(node_log "$1")
	[[ -f $f ]] || die "no log at $f"
	echo "==> $f" >&2
	tail -n "${2:-100}" "$f"
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
	exit 2
}

verb=${1:-}
shift || true
# Only 'up' chooses the listeners; the other verbs act on the cluster as it
# was started.
if [[ $verb != up && -f $STATE/security ]]; then
	SECURITY=$(<"$STATE/security")
fi
case $verb in
install) cmd_install ;;
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
bootstrap) bootstrap ;;
kill) cmd_kill "$@" ;;
pause) cmd_signal STOP paused "$@" ;;
resume) cmd_signal CONT resumed "$@" ;;
restart) cmd_restart "$@" ;;
heal) cmd_heal ;;
logs) cmd_logs "$@" ;;
*) usage ;;
esac
