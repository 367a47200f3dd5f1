#!/bin/sh
# The node-problem-detector custom plugin contract: exit 0 OK, 1 problem, anything
# else unknown; the first line of stdout is the condition's message, at most
# KILN_NPD_MAX characters.
max="${KILN_NPD_MAX:-80}"
out=$(timeout "${KILN_TIMEOUT:-50}" "${KILN_BIN:-/opt/kiln/kiln}" health --state "${KILN_STATE:-/var/lib/kiln/health-state.json}" ${KILN_HEALTH_ARGS:-} 2>&1)
rc=$?
line=$(printf '%s\n' "$out" | head -n 1)
case $rc in
  0) code=0 ;;
  1|2|3) code=1 ;;
  124) code=3; line="kiln health timed out after ${KILN_TIMEOUT:-50}s" ;;
  *) code=3 ;;
esac
[ -n "$line" ] || line="kiln health gave no answer (exit $rc)"
# kiln ends its line with the fault code (`... [KILN-MEM-002]`, then ` (and N more faults)` where
# there are more faults): it leads here, so that the cut to NPD's length keeps it.
printf '%s\n' "$line" |
  sed -E 's/^(.*) \[(KILN-[A-Z]+-[0-9]+)\]( \(and [0-9]+ more faults?\))?$/\2 \1\3/' |
  cut -c "1-$max"
exit $code
