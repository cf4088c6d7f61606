#!/usr/bin/env bash
# Takes two of the guest kernel's memory habits out of a benchmark on a
# virtual machine, and puts them back afterwards (BENCHMARKS.md, "A check:
# what the real cluster's slow state is").
#
#  - Free page reporting (virtio-balloon): the guest tells the host which
#    free memory it has not used for a couple of seconds, and the host
#    takes it back. The next touch of such a page faults in the host; on
#    this machine that costs about 4.5 us more per 4 KiB page, in the sys
#    time of whatever process allocates it: the brokers' page cache, the
#    clients' socket buffers and heaps. "on" stops the reporting
#    (page_reporting_order above the largest order) and touches the free
#    memory once, so that the host backs it again.
#  - Writeback of the brokers' logs: a benchmark topic is deleted minutes
#    after it is written; the kernel would write it to disk 30 s after it
#    was dirtied, on the same two cores. "on" lets dirty data wait 10
#    minutes and fill up to half of memory first.
#
# Usage (as root): bench/scripts/quiet-memory.sh on|off|status
#   on      save the current settings, then change them (above)
#   off     restore the saved settings
#   status  print them
#
# Not for production machines, and not needed for kfake runs' correctness:
# it only makes runs of the same thing measure the same.
set -euo pipefail

SAVE=${KPROD_QUIET_SAVE:-/tmp/kprod-quiet-memory.saved}
ORDER=/sys/module/page_reporting/parameters/page_reporting_order
VM=/proc/sys/vm
KNOBS=(dirty_expire_centisecs dirty_background_ratio dirty_ratio)

log() { printf 'quiet-memory: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

status() {
	if [[ -r $ORDER ]]; then
		echo "page_reporting_order $(cat "$ORDER")"
	else
		echo "page_reporting_order (no free page reporting in this kernel)"
	fi
	for k in "${KNOBS[@]}"; do echo "$k $(cat "$VM/$k")"; done
}

# touch_free maps most of the free memory once, page by page, and lets it
# go: with reporting stopped, the host keeps backing it.
touch_free() {
	local kib
	kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
	kib=$((kib * 9 / 10))
	log "touching $((kib / 1024)) MiB of free memory once"
	python3 - "$kib" <<'EOF'
import mmap, sys
n = int(sys.argv[1]) // 1024 << 20  # whole MiB
m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for off in range(0, n, 1 << 20):
    m[off:off + (1 << 20)] = bytes(1 << 20)
m.close()
EOF
}

case ${1:-} in
on)
	[[ $(id -u) == 0 ]] || die "needs root (it writes $VM and $ORDER)"
	if [[ ! -e $SAVE ]]; then
		status >"$SAVE"
		log "saved the current settings in $SAVE"
	fi
	if [[ -w $ORDER ]]; then
		echo 11 >"$ORDER" # above MAX_PAGE_ORDER (10): nothing is reported
	else
		log "no free page reporting here; only the writeback settings change"
	fi
	echo 60000 >"$VM/dirty_expire_centisecs"
	echo 50 >"$VM/dirty_background_ratio"
	echo 80 >"$VM/dirty_ratio"
	sync
	echo 3 >"$VM/drop_caches"
	touch_free
	status
	;;
off)
	[[ $(id -u) == 0 ]] || die "needs root (it writes $VM and $ORDER)"
	[[ -e $SAVE ]] || die "nothing saved in $SAVE: was 'on' run?"
	while read -r k v; do
		case $k in
		page_reporting_order) [[ $v =~ ^[0-9]+$ && -w $ORDER ]] && echo "$v" >"$ORDER" ;;
		*) [[ -w $VM/$k ]] && echo "$v" >"$VM/$k" ;;
		esac
	done <"$SAVE"
	rm -f "$SAVE"
	status
	;;
status) status ;;
*) die "usage: $0 on|off|status" ;;
esac
