#!/usr/bin/env bash
# This node's address for Ray and vLLM's rendezvous, as cluster/specab.sbatch finds it on
# each node (run there by srun, outside any container):
#
#   cluster/node-address.sh [HEAD_ADDRESS]
#
# A node with several networks (a GB10's ConnectX-7 pair link, its management port, a
# docker0 bridge whose 172.17.0.1 every node holds) must give the address of the network the
# nodes share, never the first one in interface order. In this order:
#   1. the IPv4 of SPECAB_NODE_IFACE, when set;
#   2. with HEAD_ADDRESS (a worker): the source address of this node's route to the head,
#      the address the head can reach it at;
#   3. in a Slurm step: the address Slurm itself reaches this node at (its NodeAddr, as
#      `scontrol show node` gives it, when this node holds it), else the source address of
#      this node's route to slurmctld (SlurmctldHost);
#   4. the hostname's first IPv4 address that is not loopback;
#   5. the first global IPv4 address that is not on a container bridge (docker*, br-*,
#      virbr*, cni*, podman*, veth*, cali*, flannel*, lxc*).
# Ubuntu and DGX OS often map the hostname to 127.0.1.1 in /etc/hosts: an address on loopback
# is never printed. IPv6 is ignored throughout: Ray's and vLLM's host:port strings would need
# it bracketed, so an IPv6 NodeAddr, head or hostname address is passed over. Exit 2 with one
# line when nothing routable is found (set SPECAB_NODE_IFACE).
set -euo pipefail

HEAD=${1:-}
loopback() { [[ -z "$1" || $1 == 127.* || $1 == ::1 ]]; }
ipv4() { [[ $1 =~ ^[0-9]+(\.[0-9]+){3}$ ]]; }
say() { echo "$1"; exit 0; }
# "IFACE ADDR" for each IPv4 address this node holds, in interface order
addresses() { ip -4 -o addr show "$@" 2>/dev/null | awk '{split($4, a, "/"); print $2, a[1]}'; }
held() { addresses | awk -v a="$1" '$2 == a {found = 1} END {exit !found}'; }
route_src() { ip -4 route get "$1" 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1; }
# a name's IPv4 addresses as this node resolves them, or an IPv4 literal itself
resolve4() {
    if ipv4 "$1"; then echo "$1"; else getent ahostsv4 "$1" 2>/dev/null | awk '!s[$1]++ {print $1}'; fi
}

if [[ -n "${SPECAB_NODE_IFACE:-}" ]]; then
    addr=$(addresses dev "$SPECAB_NODE_IFACE" | awk '{print $2}' | head -1)
    if loopback "$addr"; then
        echo "specab: $(hostname -s): SPECAB_NODE_IFACE=$SPECAB_NODE_IFACE has no IPv4 address other than loopback" \
            "here: name the interface of the network every node reaches (ip -4 addr)" >&2
        exit 2
    fi
    say "$addr"
fi
if [[ -n "$HEAD" ]] && ipv4 "$HEAD" && ! loopback "$HEAD"; then
    addr=$(route_src "$HEAD")
    loopback "$addr" || say "$addr"
fi
if [[ -n "${SLURMD_NODENAME:-}" ]] && command -v scontrol >/dev/null 2>&1; then
    node_addr=$(scontrol show node -o "$SLURMD_NODENAME" 2>/dev/null \
        | tr ' ' '\n' | sed -n 's/^NodeAddr=//p' | head -1 || true)
    if [[ -n $node_addr ]]; then
        for addr in $(resolve4 "$node_addr"); do
            if ! loopback "$addr" && held "$addr"; then say "$addr"; fi
        done
    fi
    # SlurmctldHost[0] = name or name(address)
    ctl=$(scontrol show config 2>/dev/null | sed -n 's/^SlurmctldHost\[0\] *= *//p' | head -1 || true)
    ctl_addr=$(sed -n 's/.*(\(.*\)).*/\1/p' <<<"$ctl")
    if [[ -n $ctl ]]; then
        for addr in $(resolve4 "${ctl_addr:-${ctl%%(*}}"); do
            loopback "$addr" && continue
            src=$(route_src "$addr")
            loopback "$src" || say "$src"
        done
    fi
fi
named=$(hostname --ip-address 2>/dev/null || true)
addr=$(tr ' ' '\n' <<<"$named" | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -v '^127\.' | head -1 || true)
loopback "$addr" || say "$addr"
named=${named%% *}
addr=$(addresses scope global | grep -Ev '^(docker|br-|virbr|cni|podman|veth|cali|flannel|lxc)' \
    | awk '{print $2}' | head -1 || true)
loopback "$addr" || say "$addr"
echo "specab: $(hostname -s) has no routable address (its hostname resolves to" \
    "${named:-nothing}, and no interface has a global IPv4): set SPECAB_NODE_IFACE to the" \
    "interface of the network every node reaches" >&2
exit 2
