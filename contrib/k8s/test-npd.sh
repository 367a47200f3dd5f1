#!/bin/bash
# Tests kiln-npd.sh against node-problem-detector's custom plugin contract: exit 0 OK,
# 1 problem, anything else unknown; one line of at most max_output_length characters;
# a kiln that hangs is cut off by the timeout and reported unknown. Also checks that the
# copy inside kiln-npd.yaml's ConfigMap is this file.
# Usage: test-npd.sh KILN_BINARY FIXTURE_DIR PYTHON_WITH_YAML
set -uo pipefail
kiln=$(readlink -f "$1")
fixtures=$(readlink -f "$2")
python=${3:-python3}
here=$(dirname "$(readlink -f "$0")")
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
failures=0

plugin() {  # plugin WANT_RC MESSAGE_PATTERN -- env assignments
    local want=$1 pattern=$2
    shift 2
    local out rc
    out=$(env -i PATH=/usr/bin:/bin HOME="$t" KILN_STATE="$t/state-$RANDOM.json" "$@" /bin/sh "$here/kiln-npd.sh")
    rc=$?
    local lines
    lines=$(printf '%s\n' "$out" | wc -l)
    if [[ $rc -ne $want || $lines -ne 1 || ${#out} -gt 80 || "$out" != $pattern ]]; then
        echo "FAIL ($*): exit $rc, $lines lines, ${#out} chars: '$out'; wanted exit $want, '$pattern'" >&2
        failures=$((failures + 1))
    else
        echo "ok exit $rc: $out"
    fi
}

plugin 0 'KILN-OK-000 OK: 1 GPU healthy*' KILN_BIN="$kiln" KILN_HEALTH_ARGS="--telemetry-replay $fixtures/healthy_idle.jsonl"
plugin 1 'KILN-XID-079 GPU0 GPU-6c4f3a5e...: Xid 79 (fallen off the bus)*' KILN_BIN="$kiln" KILN_HEALTH_ARGS="--telemetry-replay $fixtures/xid79.jsonl"
plugin 1 'KILN-PCI-001 GPU0 GPU-6c4f3a5e...: PCIe generation 3 of 5*' KILN_BIN="$kiln" KILN_HEALTH_ARGS="--telemetry-replay $fixtures/pcie_downtrained.jsonl"
# With the node's state file, the fault stays a problem on the next check (nothing new in
# the log) until it is cleared: the condition does not flip back by itself.
plugin 1 'KILN-XID-079 GPU0 GPU-6c4f3a5e...: Xid 79*' KILN_BIN="$kiln" KILN_STATE="$t/node-state.json" KILN_HEALTH_ARGS="--telemetry-replay $fixtures/xid79.jsonl"
plugin 1 'KILN-XID-079 GPU0 GPU-6c4f3a5e...: Xid 79*' KILN_BIN="$kiln" KILN_STATE="$t/node-state.json" KILN_HEALTH_ARGS="--telemetry-replay $fixtures/healthy_idle.jsonl"
"$kiln" health --state "$t/node-state.json" --telemetry-replay "$fixtures/healthy_idle.jsonl" --clear all >/dev/null
plugin 0 'KILN-OK-000 OK: 1 GPU healthy*' KILN_BIN="$kiln" KILN_STATE="$t/node-state.json" KILN_HEALTH_ARGS="--telemetry-replay $fixtures/healthy_idle.jsonl"
# kiln could not check (exit 4: no NVIDIA driver on this machine): unknown, not a problem.
plugin 3 'KILN-NOT-001 no GPU to check: *' KILN_BIN="$kiln"
# A kiln that hangs: the plugin's own timeout answers before NPD's.
cat >"$t/hung-kiln" <<'STUB'
#!/bin/sh
sleep 30
STUB
chmod +x "$t/hung-kiln"
plugin 3 'kiln health timed out after 1s' KILN_BIN="$t/hung-kiln" KILN_TIMEOUT=1
# A message longer than NPD keeps is cut, to one line, its fault code leading.
cat >"$t/long-kiln" <<'STUB'
#!/bin/sh
printf 'GPU0 GPU-12345678...: %0200d [KILN-MEM-002]\nsecond line\n' 0
exit 1
STUB
chmod +x "$t/long-kiln"
plugin 1 'KILN-MEM-002 GPU0 GPU-12345678...: 000*' KILN_BIN="$t/long-kiln"

# The ConfigMap carries this very script.
if ! "$python" - "$here/kiln-npd.yaml" "$here/kiln-npd.sh" <<'PY'
import sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1])))
cm = next(d for d in docs if d and d["kind"] == "ConfigMap")
assert cm["data"]["kiln-npd.sh"] == open(sys.argv[2]).read(), "kiln-npd.yaml's copy of kiln-npd.sh differs"
import json
plugin = json.loads(cm["data"]["kiln-plugin.json"])
assert plugin["conditions"][0]["type"] == "KilnGpuProblem"
assert plugin["rules"][0]["condition"] == "KilnGpuProblem"
assert plugin["pluginConfig"]["max_output_length"] == 80
PY
then
    failures=$((failures + 1))
else
    echo "ok the ConfigMap carries kiln-npd.sh and the KilnGpuProblem condition"
fi
[[ $failures -eq 0 ]] && echo PASS
exit $failures
