#!/bin/bash
# Submits the fleet flow: an array job running the fleet profile on N nodes into a shared
# folder, and a job that builds the baseline from them once every task has ended.
# Usage: kiln-fleet.sh NODES RUNS_FOLDER [sbatch options for the array, e.g. -p gpu]
# Prints the two job ids.
set -eu
nodes=${1:?usage: kiln-fleet.sh NODES RUNS_FOLDER [SBATCH_OPTIONS...]}
runs=${2:?usage: kiln-fleet.sh NODES RUNS_FOLDER [SBATCH_OPTIONS...]}
shift 2
here=$(dirname "$(readlink -f "$0")")
mkdir -p "$runs"
array=$(sbatch --parsable --array="0-$((nodes - 1))" \
    --export="ALL,KILN_FLEET_RUNS=$runs" "$@" "$here/kiln-fleet.sbatch")
array=${array%%;*}
baseline=$(sbatch --parsable --dependency="afterany:$array" \
    --export="ALL,KILN_FLEET_RUNS=$runs,KILN_FLEET_JOB=$array" "$here/kiln-fleet-baseline.sbatch")
echo "fleet array job $array, baseline job ${baseline%%;*}"
