#!/bin/bash
# usage: scripts/vrf-stop-time.sh BIN [N=192] [PREMADE=0|1]
# Starts lanyard (BIN) with N VRFs, one routed subinterface each on one
# port, no FRR; waits for `ready`, SIGTERMs it and prints the start and
# stop times, how many VRF namespaces were left and the logged stop
# phases (docs/vrf.md, "Status"). PREMADE=1: the namespaces are made
# first with `ip netns add` (Lanyard keeps those). Needs root; cleans up.
BIN=$1; N=${2:-192}; PRE=${3:-0}
D=lyx$$; T=lyt$$; DIR=$(mktemp -d)
mkdir -p $DIR
ip netns add $D; ip netns add $T
ip -n $D link add sw1 type veth peer name t1 netns $T
ip -n $D link set sw1 up; ip -n $T link set t1 up; ip -n $D link set lo up
{
echo "switch: {name: x}"
echo "management: {socket: $DIR/s.sock}"
echo "ports:"
echo "  - name: sw1"
echo "    mode: routed"
echo "    subinterfaces:"
for i in $(seq 0 $((N-1))); do echo "      - {vlan: $((100+i)), addresses: [10.1.0.1/24]}"; done
echo "vrfs:"
for i in $(seq 0 $((N-1))); do echo "  - {name: V$i, interfaces: [sw1.$((100+i))], table: $((2000+i)), namespace: lysc$$-$i}"; done
} > $DIR/c.yaml
if [ "$PRE" = 1 ]; then for i in $(seq 0 $((N-1))); do ip netns add lysc$$-$i; done; fi
t0=$(date +%s.%N)
ip netns exec $D $BIN run --config $DIR/c.yaml > $DIR/log 2>&1 &
P=$!
for k in $(seq 1 600); do grep -q 'ready' $DIR/log && break; sleep 0.1; done
t1=$(date +%s.%N)
sleep 1
t2=$(date +%s.%N)
kill -TERM $P
wait $P
t3=$(date +%s.%N)
echo "N=$N premade=$PRE start $(echo "$t1-$t0"|bc) s, stop $(echo "$t3-$t2"|bc) s; left: $(ls /run/netns | grep -c lysc$$-)"
grep -i 'stopping:\|stopped:' $DIR/log | cut -c29-150
for i in $(seq 0 $((N-1))); do ip netns del lysc$$-$i 2>/dev/null; rm -f /run/netns/lysc$$-$i; done
ip netns del $D; ip netns del $T
rm -rf $DIR
