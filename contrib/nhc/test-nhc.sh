#!/bin/bash
# Tests the NHC check with a stub `die` that records what NHC would be told.
# Usage: test-nhc.sh KILN_BINARY FIXTURE_DIR
set -uo pipefail
kiln=$(readlink -f "$1")
fixtures=$(readlink -f "$2")
here=$(dirname "$(readlink -f "$0")")
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
failures=0

died=""
die() { died="$1|$2"; return "$1"; }
. "$here/kiln.nhc"

expect() {  # expect NAME WANT_RC WANT_DIED -- args
    local name=$1 want_rc=$2 want_died=$3
    shift 3
    died=""
    KILN_BIN="$kiln" KILN_STATE="$t/state-$name.json" check_kiln "$@"
    local rc=$?
    # WANT_DIED is exact, or PREFIX*SUFFIX (the text around '*' taken literally).
    local matched=no
    if [[ "$want_died" == *'*'* ]]; then
        local pre=${want_died%%\**} suf=${want_died#*\*}
        [[ "$died" == "$pre"* && "$died" == *"$suf" ]] && matched=yes
    elif [[ "$died" == "$want_died" ]]; then
        matched=yes
    fi
    if [[ $rc -ne $want_rc || $matched == no ]]; then
        echo "FAIL $name: rc $rc, die '$died'; wanted rc $want_rc, die '$want_died'" >&2
        failures=$((failures + 1))
    else
        echo "ok $name: ${died:-passed}"
    fi
}

expect healthy 0 "" --telemetry-replay "$fixtures/healthy_idle.jsonl"
expect xid79 1 "1|check_kiln: GPU0 GPU-6c4f3a5e...: Xid 79 (fallen off the bus)*[KILN-XID-079]" \
    --telemetry-replay "$fixtures/xid79.jsonl"
# The next check with the same state: nothing new in the log, the fault stays open.
expect xid79 1 "1|check_kiln: GPU0 GPU-6c4f3a5e...: Xid 79 (fallen off the bus) since boot (open since*[KILN-XID-079]" \
    --telemetry-replay "$fixtures/healthy_idle.jsonl"
# Cleared by a person: the node passes again.
"$kiln" health --state "$t/state-xid79.json" --telemetry-replay "$fixtures/healthy_idle.jsonl" \
    --clear all >/dev/null
expect xid79 0 "" --telemetry-replay "$fixtures/healthy_idle.jsonl"
# A fresh node (no full run yet) is not yet tested: no drain, unless asked for.
expect fresh 0 "" --telemetry-replay "$fixtures/healthy_idle.jsonl" --runs "$t/no-runs" --max-age 720h
KILN_DRAIN_UNTESTED=1 expect fresh-drained 1 "1|check_kiln: not yet tested: *[KILN-RUN-003]" \
    --telemetry-replay "$fixtures/healthy_idle.jsonl" --runs "$t/no-runs" --max-age 720h
expect count 1 "1|check_kiln: 1 of 8 GPUs found [KILN-CNT-001]" \
    --telemetry-replay "$fixtures/healthy_idle.jsonl" --expect-gpus 8
expect no-driver 1 "1|check_kiln: no GPU to check: *[KILN-NOT-001]"
died=""
KILN_BIN="$t/no-such-kiln" check_kiln
if [[ "$died" != "1|check_kiln: kiln not found ($t/no-such-kiln)" ]]; then
    echo "FAIL missing kiln: die '$died'" >&2
    failures=$((failures + 1))
else
    echo "ok missing kiln: $died"
fi
[[ $failures -eq 0 ]] && echo PASS
exit $failures
