#!/usr/bin/env bash
# The project's test command (README): bash scripts/test.sh [go test args]
#
# Installs Kafka if missing, starts the 3-broker test cluster
# (scripts/kafka-cluster.sh), runs go vet (./..., or the packages named in the
# arguments; and bench/ if it is its own module) and then
#   go test -race -count=1 -timeout 40m -p 1 ./...
# with KPROD_INTEGRATION=1 and KPROD_BROKERS set, and always stops the cluster
# afterwards. Exits with go test's status.
#
# Arguments replace ./... and are appended to the flags above, so name the
# packages when passing flags:  bash scripts/test.sh -run TestX ./internal/...
# -p 1 (one test binary at a time) is the default because every package's
# integration tests share one cluster and fault tests kill its brokers;
# KPROD_TEST_P=2 (or -p 2 in the arguments) overrides it.
#
# The cluster gets its secured listeners (SASL_PLAINTEXT, SSL, SASL_SSL) for
# the security tests: KPROD_KAFKA_SECURITY=1 unless set otherwise (0 skips
# those tests and starts a little faster; under CI=true they fail instead).
set -uo pipefail
export KPROD_KAFKA_SECURITY=${KPROD_KAFKA_SECURITY:-1}

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
CLUSTER=(bash scripts/kafka-cluster.sh)

say() { printf '==> %s\n' "$*" >&2; }

say "installing Kafka (cached after the first run)"
"${CLUSTER[@]}" install || exit 1
# kcat (librdkafka) reads records back in the interop tests, which fail
# without it under CI.
if ! command -v kcat >/dev/null && ! (apt-get update -qq && apt-get install -y -qq kcat); then
	case ${CI:-} in
	true | 1) say "could not install kcat (apt-get install kcat): under CI the interop tests need it"; exit 1 ;;
	*) say "warning: could not install kcat (apt-get install kcat); the interop tests skip their kcat part" ;;
	esac
fi

# stop_job ends a background job of ours and its children (an interrupted
# run: background jobs ignore SIGINT in a script, so ^C does not reach them).
stop_job() {
	[[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null || return 0
	pkill -TERM -P "$1" 2>/dev/null
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

cleanup() {
	local rc=$?
	# The tests first, then an 'up' still starting (else it would start the
	# brokers after 'down' has stopped them). A restart or heal that a killed
	# test binary left running is waited for by 'down' (its lock).
	stop_job "${test_pid:-}"
	stop_job "${up_pid:-}"
	say "stopping the Kafka test cluster"
	if ! "${CLUSTER[@]}" down; then
		say "could not stop the Kafka test cluster: a broker may still run"
		((rc != 0)) || rc=1
	fi
	rm -f "${up_out:-}" "${up_err:-}"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Start the cluster in the background while go vet runs.
up_out=$(mktemp) up_err=$(mktemp)
say "starting the Kafka test cluster"
"${CLUSTER[@]}" up >"$up_out" 2>"$up_err" &
up_pid=$!

# Vet what is tested: the package patterns among the arguments, else ./...
vet_pkgs=()
for a in "$@"; do
	case $a in ./* | ../* | github.com/kprod/kprod*) vet_pkgs+=("$a") ;; esac
done
((${#vet_pkgs[@]} > 0)) || vet_pkgs=(./...)
vet_status=0
vet_failed="go vet ${vet_pkgs[*]}"
say "$vet_failed"
go vet "${vet_pkgs[@]}" || vet_status=$?
# The modules of their own (bench/, kprom/) are vetted too; their unit
# tests need no cluster and run here.
for mod in bench kprom; do
	if ((vet_status == 0)) && [[ -f $mod/go.mod ]]; then
		vet_failed="go vet ./... in $mod/"
		say "$vet_failed"
		(cd "$mod" && go vet ./...) || vet_status=$?
	fi
done
if ((vet_status == 0)) && ((${#vet_pkgs[@]} == 1)) && [[ ${vet_pkgs[0]} == ./... ]]; then
	# bench/ without -race: its tests check the report's arithmetic, and
	# a race build of every peer client would cost a minute.
	for mod in kprom bench; do
		race=-race
		[[ $mod == bench ]] && race=
		if ((vet_status == 0)) && [[ -f $mod/go.mod ]]; then
			vet_failed="go test $race ./... in $mod/"
			say "$vet_failed"
			(cd "$mod" && go test $race -count=1 ./...) || vet_status=$?
		fi
	done
fi

up_status=0
wait "$up_pid" || up_status=$?
up_pid= # reaped: its pid may be reused by now, so cleanup must not signal it
cat "$up_err" >&2
if ((up_status != 0)); then
	say "the Kafka test cluster did not start (status $up_status)"
	exit 1
fi
((vet_status == 0)) || { say "failed: $vet_failed"; exit "$vet_status"; }

KPROD_BROKERS=$(tail -n 1 "$up_out")
# The fault suite writes its lost/duplicated/reordered counts here; they
# are printed after the tests (go test hides passing tests' logs).
KPROD_FAULT_REPORT=$(mktemp)
export KPROD_BROKERS KPROD_INTEGRATION=1 KPROD_FAULT_REPORT
say "KPROD_BROKERS=$KPROD_BROKERS"

args=("$@")
((${#args[@]} > 0)) || args=(./...)
say "go test -race -count=1 -timeout 40m -p ${KPROD_TEST_P:-1} ${args[*]}"
test_status=0
# In the background, waited for: a signal to this script then runs its trap
# at once (it would wait for a foreground go test to end), which stops the
# tests and the cluster.
go test -race -count=1 -timeout 40m -p "${KPROD_TEST_P:-1}" "${args[@]}" &
test_pid=$!
wait "$test_pid" || test_status=$?
test_pid=

# The microbenchmarks run once, briefly, so that they cannot rot; they
# assert nothing about speed (BENCHMARKS.md has the numbers and how to
# take them). The allocation tests run here too: recbatch's skip under
# -race, whose instrumentation allocates there.
if ((test_status == 0)) && (($# == 0)); then
	say "go test -run 'Allocs\$' -bench . -benchtime 10x ./... (allocation tests without -race; microbenchmarks, once)"
	go test -run 'Allocs$' -bench . -benchtime 10x ./... || test_status=$?
fi

if [[ -s $KPROD_FAULT_REPORT ]]; then
	say "fault suite: lost / duplicated / reordered counts per scenario"
	cat "$KPROD_FAULT_REPORT"
fi
rm -f "$KPROD_FAULT_REPORT"
if ((test_status != 0)); then
	"${CLUSTER[@]}" status || true
	for n in 1 2 3; do
		say "tail of broker $n's log"
		"${CLUSTER[@]}" logs "$n" 40 || true
	done
fi
exit "$test_status"
