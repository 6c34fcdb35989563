#!/bin/sh
# mpirun's rsh agent (--mca plm_rsh_agent) for test "hosts" that are network namespaces on this
# machine: mpirun calls `agent [options] HOST COMMAND...`; HOST is an address that
# EMBER_NETNS_MAP ("10.77.0.2=ns1,...") maps to a namespace, and COMMAND (Open MPI's orted) runs
# inside it, as ssh would run it on that host.
for arg in "$@"; do
  shift
  for pair in $(echo "$EMBER_NETNS_MAP" | tr ',' ' '); do
    if [ "$arg" = "${pair%%=*}" ]; then
      exec ip netns exec "${pair#*=}" sh -c "$*"
    fi
  done
done
echo "netns_rsh_agent: no host of EMBER_NETNS_MAP='$EMBER_NETNS_MAP' in the arguments" >&2
exit 1
