#!/bin/bash
# Slurm HealthCheckProgram: checks the node's GPUs with `kiln health` and drains the node
# with reason "kiln: <message>" on a fault; resumes it when the fault that kiln drained
# it for has cleared. slurm.conf:
#   HealthCheckProgram=/usr/local/lib/kiln/kiln-healthcheck.sh
#   HealthCheckInterval=300
#   HealthCheckNodeState=ANY,CYCLE
# Settings (environment, or /etc/default/kiln): KILN_BIN, KILN_HEALTH_ARGS (e.g.
# "--expect-gpus 8 --max-age 168h --runs /var/lib/kiln/runs"), KILN_STATE, KILN_DRAIN_ON.
[ -r /etc/default/kiln ] && . /etc/default/kiln
. "$(dirname "$(readlink -f "$0")")/kiln-node.sh"
kiln_node_check
