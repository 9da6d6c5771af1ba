#!/usr/bin/env bash
# This node's address for Ray and vLLM's rendezvous, as cluster/specab.sbatch finds it on
# each node (run there by srun, outside any container):
#
#   cluster/node-address.sh [HEAD_ADDRESS]
#
# In this order: the IPv4 of SPECAB_NODE_IFACE when set; with HEAD_ADDRESS, the source
# address of this node's route to the head (the address the head can reach it at); the
# hostname's first IPv4 address that is not loopback; else the first global IPv4 address.
# Only IPv4 is printed: an IPv6 address of the hostname or an IPv6 head is passed over. Ubuntu and
# DGX OS often map the hostname to 127.0.1.1 in /etc/hosts: an address on loopback is never
# printed. Exit 2 with one line when nothing routable is found (set SPECAB_NODE_IFACE).
set -euo pipefail

HEAD=${1:-}
loopback() { [[ -z "$1" || $1 == 127.* || $1 == ::1 ]]; }
say() { echo "$1"; exit 0; }

if [[ -n "${SPECAB_NODE_IFACE:-}" ]]; then
    addr=$(ip -4 -o addr show dev "$SPECAB_NODE_IFACE" 2>/dev/null | awk '{print $4}' \
        | cut -d/ -f1 | head -1)
    if loopback "$addr"; then
        echo "specab: $(hostname -s): SPECAB_NODE_IFACE=$SPECAB_NODE_IFACE has no IPv4 address other than loopback" \
            "here: name the interface of the network every node reaches (ip -4 addr)" >&2
        exit 2
    fi
    say "$addr"
fi
if [[ -n "$HEAD" ]] && ! loopback "$HEAD"; then
    addr=$(ip -4 route get "$HEAD" 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1)
    loopback "$addr" || say "$addr"
fi
# The hostname's first IPv4 that is not loopback: it may resolve to IPv6 too (printed
# first on some hosts), which Ray's and vLLM's host:port strings would need bracketed.
named=$(hostname --ip-address 2>/dev/null || true)
addr=$(tr ' ' '\n' <<<"$named" | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -v '^127\.' | head -1 || true)
loopback "$addr" || say "$addr"
named=${named%% *}
addr=$(ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
loopback "$addr" || say "$addr"
echo "specab: $(hostname -s) has no routable address (its hostname resolves to" \
    "${named:-nothing}, and no interface has a global IPv4): set SPECAB_NODE_IFACE to the" \
    "interface of the network every node reaches" >&2
exit 2
