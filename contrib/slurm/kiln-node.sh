# Shared by the Slurm hooks: run `kiln health`, then drain this node with the reason
# "kiln: <message>", or resume it when kiln itself drained it and the check passes now.
# An administrator's drain (any reason not starting "kiln:") is never touched.
# Sourced with KILN_HEALTH_EXTRA set to extra `kiln health` arguments.

# slurmd runs its programs with an almost empty environment: set what is needed here.
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${KILN_PATH:+:$KILN_PATH}"
export SLURM_CONF="${SLURM_CONF:-/etc/slurm/slurm.conf}"

kiln_bin="${KILN_BIN:-kiln}"
kiln_node="${KILN_NODE:-$(hostname -s)}"
kiln_state="${KILN_STATE:-/var/lib/kiln/health-state.json}"
# Exit codes of `kiln health` that drain: 1 hardware, 2 environment, 3 software,
# 4 could not check (a GPU node whose GPUs cannot be checked is not fit for jobs).
# 6 (not yet tested: no full run in the runs directory) is not a fault and never drains
# by default: a fresh node gets its burn-in (KILN_UNTESTED) and stays in service.
kiln_drain_on="${KILN_DRAIN_ON:-1 2 3 4}"
# What a node not yet tested gets: "burn-in" submits kiln-burnin.sbatch for it once (it
# takes the node whole when the jobs on it end), "wait" only says so.
kiln_untested="${KILN_UNTESTED:-burn-in}"
kiln_burnin="${KILN_BURNIN:-$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kiln-burnin.sbatch}"

# A node not yet tested: its burn-in submitted once (the job id kept beside the state
# file), or said to be under way while that job is still queued or running.
kiln_start_burnin() {
    local line=$1 job_file="$kiln_state.burn-in-job" job
    if [ "$kiln_untested" != burn-in ]; then
        echo "kiln: $line (not yet tested: waiting for a full run; not draining)"
        return 0
    fi
    job=$(cat "$job_file" 2>/dev/null)
    if [ -n "$job" ] && [ -n "$(squeue -h -j "$job" 2>/dev/null)" ]; then
        echo "kiln: $line (not yet tested: its burn-in, job $job, is queued or running; not draining)"
        return 0
    fi
    job=$(sbatch --parsable --nodelist="$kiln_node" "$kiln_burnin" 2>/dev/null | cut -d';' -f1)
    if [ -n "$job" ]; then
        printf '%s\n' "$job" >"$job_file"
        echo "kiln: $line (not yet tested: submitted its burn-in, job $job; not draining)"
    else
        echo "kiln: $line (not yet tested: the burn-in $kiln_burnin could not be submitted; not draining)"
    fi
    return 0
}

# kiln's JSON is read, never its text: a name a GPU, a process or a log line gave cannot
# make a line of its own here. jq reads it (`apt install jq`, `dnf install jq`).
kiln_reason() {
    # The check's first line, from its JSON, with anything that is not printable blanked.
    jq -r '.line // empty | gsub("[[:cntrl:]]"; " ")' 2>/dev/null
}

kiln_node_check() {
    mkdir -p "$(dirname "$kiln_state")" 2>/dev/null
    local out rc line reason state err
    err=$(mktemp)
    # shellcheck disable=SC2086 # the extra arguments are words on purpose
    out=$("$kiln_bin" health --json --state "$kiln_state" ${KILN_HEALTH_ARGS:-} ${KILN_HEALTH_EXTRA:-} 2>"$err")
    rc=$?
    if command -v jq >/dev/null 2>&1; then
        line=$(printf '%s' "$out" | kiln_reason)
    else
        line="kiln health exit $rc (install jq to read its reason)"
    fi
    # No JSON: kiln refused its arguments, in one sentence of its own on stderr.
    [ -n "$line" ] || line=$(head -n 1 "$err" | tr -d '\000-\037')
    rm -f "$err"
    [ -n "$line" ] || line="kiln health gave no answer (exit $rc)"
    reason=$(sinfo -h -N -n "$kiln_node" -o '%E' 2>/dev/null | head -n 1)
    state=$(sinfo -h -N -n "$kiln_node" -o '%t' 2>/dev/null | head -n 1)
    local drained=no
    case "$state" in drain* | drng* ) drained=yes ;; esac
    case "$reason" in "kiln:"*) ours=yes ;; *) ours=no ;; esac
    if [ "$rc" -eq 0 ]; then
        if [ "$drained" = yes ] && [ "$ours" = yes ]; then
            scontrol update nodename="$kiln_node" state=resume
            echo "kiln: resumed $kiln_node: $line"
        fi
        return 0
    fi
    case " $kiln_drain_on " in
        *" $rc "*) ;;
        *)
            if [ "$rc" -eq 6 ]; then
                # Not yet tested is no fault: a drain of kiln's own (an earlier kiln's for
                # "no full run") is lifted, so the burn-in can take the node.
                if [ "$drained" = yes ] && [ "$ours" = yes ]; then
                    scontrol update nodename="$kiln_node" state=resume
                fi
                kiln_start_burnin "$line"
                return 0
            fi
            echo "kiln: $line (exit $rc: not draining)"
            return 0 ;;
    esac
    if [ "$drained" = yes ] && [ "$ours" = no ]; then
        echo "kiln: $line (left as drained by the administrator: $reason)"
        return 0
    fi
    scontrol update nodename="$kiln_node" state=drain reason="kiln: ${line:0:240}"
    echo "kiln: drained $kiln_node: $line"
    return 0
}
