#!/bin/bash
# Slurm Epilog: after each job, checks the GPUs the job used (SLURM_JOB_GPUS, their
# NVML indices) and drains the node on a fault. It always exits 0: a failing epilog
# would drain the node with Slurm's own reason and hide kiln's. slurm.conf:
#   Epilog=/usr/local/lib/kiln/kiln-epilog.sh
[ -r /etc/default/kiln ] && . /etc/default/kiln
. "$(dirname "$(readlink -f "$0")")/kiln-node.sh"
if [ -n "${SLURM_JOB_GPUS:-}" ]; then
    KILN_HEALTH_EXTRA="--gpus $SLURM_JOB_GPUS"
fi
kiln_node_check
exit 0
