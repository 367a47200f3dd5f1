#!/bin/bash
# Tests the Slurm hooks against a real single-node Slurm: munged, slurmctld and slurmd
# started as root in a temporary directory (no cgroups, no systemd), then:
#   a failing check drains the node with kiln's reason; a passing one resumes it;
#   an administrator's drain is left alone, passing check or failing;
#   the epilog checks only the job's GPUs; a fault stays open (the node drained) until
#   `kiln health --clear` or a passing full run.
# Usage: test-slurm.sh KILN_BINARY FIXTURE_DIR   (as root; needs slurmctld, slurmd,
# slurm-client and munge)
set -euo pipefail
kiln=$(readlink -f "$1")
fixtures=$(readlink -f "$2")
here=$(dirname "$(readlink -f "$0")")
for tool in munged slurmctld slurmd scontrol sinfo; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/setup.sh --test" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "needs root (slurmd)" >&2; exit 2; }

t=$(mktemp -d /tmp/kiln-slurm.XXXXXX)
pids=()
stop() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
    done
    if [ "${keep:-0}" != 1 ]; then rm -rf "$t"; fi
}
trap stop EXIT
fail() {
    echo "FAIL: $*" >&2
    echo "--- slurmctld.log" >&2; tail -n 20 "$t/slurmctld.log" >&2 || true
    echo "--- slurmd.log" >&2; tail -n 20 "$t/slurmd.log" >&2 || true
    keep=1
    exit 1
}

node=$(hostname -s)
# Ports from the pid, so parallel or leftover runs do not collide.
port=$((20000 + ($$ % 20000)))
mkdir -p "$t/state" "$t/spool" "$t/munge"
chmod 700 "$t/munge"
dd if=/dev/urandom of="$t/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$t/munge/munge.key"
munged --force --key-file="$t/munge/munge.key" --socket="$t/munge/munge.sock" \
    --pid-file="$t/munge/munged.pid" --log-file="$t/munge/munged.log" \
    --seed-file="$t/munge/munged.seed" --foreground >>"$t/munged.out" 2>&1 &
pids+=($!)

cat >"$t/slurm.conf" <<CONF
ClusterName=kilntest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$t/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$t/state
SlurmdSpoolDir=$t/spool
SlurmctldPidFile=$t/slurmctld.pid
SlurmdPidFile=$t/slurmd.pid
SlurmctldLogFile=$t/slurmctld.log
SlurmdLogFile=$t/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/linear
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$node NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES State=UP
CONF
export SLURM_CONF="$t/slurm.conf"
for _ in $(seq 50); do [ -S "$t/munge/munge.sock" ] && break; sleep 0.1; done
slurmctld -D -i -f "$SLURM_CONF" >>"$t/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >>"$t/slurmd.out" 2>&1 &
pids+=($!)

state() { sinfo -h -N -n "$node" -o '%t' 2>/dev/null | head -n 1; }
reason() { sinfo -h -N -n "$node" -o '%E' 2>/dev/null | head -n 1; }
wait_state() {
    for _ in $(seq 100); do
        case "$(state)" in $1) return 0 ;; esac
        sleep 0.1
    done
    fail "node state $(state), wanted $1"
}
wait_state 'idle*'

# The hook as slurmd runs it: an almost empty environment, and the node's one state file
# (KILN_STATE), where open faults stay between checks.
state_file="$t/kiln-state.json"
hook() {
    local script=$1 fixture=$2
    shift 2
    env -i SLURM_CONF="$SLURM_CONF" KILN_BIN="$kiln" KILN_STATE="$state_file" \
        KILN_HEALTH_ARGS="--telemetry-replay $fixtures/$fixture.jsonl" "$@" \
        /bin/bash "$here/$script"
}

# 0. A fresh node (no full run yet, `--max-age` asked) is not yet tested, not faulty: it
#    is never drained; its burn-in is submitted once, and the next check waits for it.
state_file="$t/kiln-state-fresh.json"
printf '%s\n' '#!/bin/bash' '#SBATCH --job-name=kiln-burn-in' "#SBATCH --output=$t/burn-in.out" \
    'sleep 5' >"$t/burn-in.sbatch"
fresh_args="--telemetry-replay $fixtures/healthy_idle.jsonl --runs $t/fresh-runs --max-age 720h"
said=$(hook kiln-healthcheck.sh healthy_idle KILN_HEALTH_ARGS="$fresh_args" KILN_BURNIN="$t/burn-in.sbatch")
case "$said" in *"not yet tested"*"submitted its burn-in, job "*) ;; *) fail "fresh node: $said" ;; esac
said=$(hook kiln-healthcheck.sh healthy_idle KILN_HEALTH_ARGS="$fresh_args" KILN_BURNIN="$t/burn-in.sbatch")
case "$said" in *"is queued or running; not draining"*) ;; *) fail "fresh node, second check: $said" ;; esac
case "$(state)" in drain* | drng*) fail "a fresh node was drained: $(reason)" ;; esac
scancel "$(cat "$state_file.burn-in-job")" 2>/dev/null
wait_state 'idle*'
echo "ok: a fresh node was not drained and got its burn-in"
state_file="$t/kiln-state.json"

# 1. A failing check drains the node with kiln's reason.
hook kiln-healthcheck.sh xid79 >/dev/null
wait_state 'drain*'
case "$(reason)" in
    "kiln: GPU0 GPU-6c4f3a5e...: Xid 79 (fallen off the bus)"*"[KILN-XID-079]"*) ;;
    *) fail "drain reason: $(reason)" ;;
esac
echo "ok: a failing check drained the node: $(reason)"

# 2. The next check sees nothing new, but the fault stays open: the node stays drained.
hook kiln-healthcheck.sh healthy_idle >/dev/null
sleep 0.5
case "$(state)" in drain*) ;; *) fail "the node was resumed with the fault still open: $(state)" ;; esac
case "$(reason)" in "kiln: "*"open since"*"[KILN-XID-079]"*) ;; *) fail "open fault reason: $(reason)" ;; esac
echo "ok: the next check kept it drained: $(reason)"

# 3. A person clears the fault; the next passing check resumes the node kiln drained.
"$kiln" health --state "$state_file" --telemetry-replay "$fixtures/healthy_idle.jsonl" \
    --clear KILN-XID-079 >/dev/null
hook kiln-healthcheck.sh healthy_idle >/dev/null
wait_state 'idle*'
echo "ok: after --clear a passing check resumed it"

# 4. An administrator's drain is left alone by a passing check and by a failing one.
state_file="$t/kiln-state-admin.json"
scontrol update nodename="$node" state=drain reason="maintenance: new PSU"
wait_state 'drain*'
hook kiln-healthcheck.sh healthy_idle >/dev/null
sleep 0.5
[ "$(reason)" = "maintenance: new PSU" ] && case "$(state)" in drain*) true ;; *) false ;; esac \
    || fail "a passing check touched the administrator's drain: $(state) $(reason)"
hook kiln-healthcheck.sh remap_failure >/dev/null
sleep 0.5
[ "$(reason)" = "maintenance: new PSU" ] || fail "a failing check overwrote the administrator's reason: $(reason)"
echo "ok: the administrator's drain was left alone"
scontrol update nodename="$node" state=resume
wait_state 'idle*'

# 5. The epilog checks only the job's GPUs: GPU 1's job is not GPU 0's fault, and does
#    not consume GPU 0's events either.
state_file="$t/kiln-state-epilog.json"
hook kiln-epilog.sh xid79_beside_a_healthy_gpu SLURM_JOB_GPUS=1 >/dev/null
sleep 0.5
case "$(state)" in idle*) ;; *) fail "the epilog drained for a GPU the job did not use: $(reason)" ;; esac
hook kiln-epilog.sh xid79_beside_a_healthy_gpu SLURM_JOB_GPUS=0 >/dev/null
wait_state 'drain*'
case "$(reason)" in "kiln: GPU0"*"[KILN-XID-079]"*) ;; *) fail "epilog reason: $(reason)" ;; esac
echo "ok: the epilog drained for the job's GPU only"
scontrol update nodename="$node" state=resume
wait_state 'idle*'

# 6. The fleet flow: an array job runs kiln on the "nodes" (here four tasks on the one
#    node, each its own run) into a shared folder; a job that depends on every task builds
#    the floors from them and judges the cards; a later run uses the floors. The caller's
#    environment (a GPU for kiln to test, KILN_TEST_RUN_ARGS) reaches the jobs through
#    sbatch's --export=ALL.
if [ -n "${KILN_TEST_RUN_ARGS:-}" ]; then
    shared="$t/fleet"
    cd "$t"
    # Four tasks on the one node would test one card four times, which the baseline counts
    # once: each task's emulated card is a card of its own, by the UUID its task gives it.
    per_task="$t/kiln-card-per-task"
    printf '%s\n' '#!/bin/bash' \
        'export KILN_EMULATE_UUID=$(printf "6d657361-0000-4000-8000-%012d" "${SLURM_ARRAY_TASK_ID:-0}")' \
        "exec \"$kiln\" \"\$@\"" > "$per_task"
    chmod +x "$per_task"
    ids=$(KILN_BIN="$per_task" KILN_RUN_ARGS="$KILN_TEST_RUN_ARGS" KILN_FLOORS="$t/no-floors.json" \
        bash "$here/kiln-fleet.sh" 4 "$shared")
    array=$(echo "$ids" | sed -n 's/^fleet array job \([0-9]*\), baseline job \([0-9]*\)$/\1/p')
    after=$(echo "$ids" | sed -n 's/^fleet array job \([0-9]*\), baseline job \([0-9]*\)$/\2/p')
    [ -n "$array" ] && [ -n "$after" ] || fail "kiln-fleet.sh said: $ids"
    for _ in $(seq 1800); do
        [ -z "$(squeue -h -j "$array,$after" 2>/dev/null)" ] && break
        sleep 0.1
    done
    [ -z "$(squeue -h -j "$array,$after" 2>/dev/null)" ] || fail "the fleet jobs did not end: $(squeue)"
    runs=$(find "$shared/$array" -name manifest.json | wc -l)
    [ "$runs" -eq 4 ] || fail "the array wrote $runs runs, not 4: $(cat "$t"/kiln-fleet-*.out)"
    floors="$shared/floors-$array.json"
    [ -s "$floors" ] || fail "no floors: $(cat "$t/kiln-fleet-baseline-$after.out")"
    grep -q '"cards": 4' "$floors" || fail "the floors do not rest on the 4 cards: $(cat "$floors")"
    grep -q "site baseline, 4 " "$t/kiln-fleet-baseline-$after.out" \
        || fail "baseline job said: $(cat "$t/kiln-fleet-baseline-$after.out")"
    echo "ok: the fleet array ran 4 runs and the job after it built the floors on 4 cards"
    # A later run where the floors are rolled out is judged against them.
    KILN_BIN="$kiln" KILN_RUN_ARGS="$KILN_TEST_RUN_ARGS" KILN_FLOORS="$floors" \
        KILN_FLEET_RUNS="$t/later" sbatch --wait --export=ALL -o "$t/later.out" \
        "$here/kiln-fleet.sbatch" >/dev/null || true
    manifest=$(find "$t/later" -name manifest.json | head -n 1)
    [ -n "$manifest" ] && grep -q '"baseline"' "$manifest" \
        || fail "the later run was not judged against the floors: $(cat "$t/later.out")"
    echo "ok: a later run is judged against the fleet's floors"
fi
echo "PASS"
