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
kiln_drain_on="${KILN_DRAIN_ON:-1 2 3 4}"

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
        *) echo "kiln: $line (exit $rc: not draining)"; return 0 ;;
    esac
    if [ "$drained" = yes ] && [ "$ours" = no ]; then
        echo "kiln: $line (left as drained by the administrator: $reason)"
        return 0
    fi
    scontrol update nodename="$kiln_node" state=drain reason="kiln: ${line:0:240}"
    echo "kiln: drained $kiln_node: $line"
    return 0
}
