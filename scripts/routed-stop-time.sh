#!/bin/bash
# usage: scripts/routed-stop-time.sh BIN [N=410] [WORKERS=2]
# Starts lanyard (BIN) with N routed ports (veth sw<i> <-> t<i>, a /30
# each, no FRR), waits for `ready` and for the twins' first frames (IPv6
# DAD/MLD, so every port's inject socket is open, as under OSPF), pings
# every tester once, SIGTERMs it and prints the start and stop times and
# the logged stop phases (docs/scale.md, "Start and stop"). Needs root;
# cleans up.
BIN=$1; N=${2:-410}; W=${3:-2}
D=lyrd$$; T=lyrt$$; DIR=$(mktemp -d)
ip netns add $D; ip netns add $T
ip -n $D link set lo up
for i in $(seq 1 $N); do
  echo "link add sw$i type veth peer name t$i netns $T"
done | ip -n $D -batch -
for i in $(seq 1 $N); do echo "link set sw$i up"; done | ip -n $D -batch -
for i in $(seq 1 $N); do
  a=$(( (i-1)*4 ))
  echo "addr add 10.64.$((a/256)).$((a%256+2))/30 dev t$i"
  echo "link set t$i up"
done | ip -n $T -batch -
{
echo "switch: {name: x, workers: $W}"
echo "management: {socket: $DIR/s.sock}"
echo "ports:"
for i in $(seq 1 $N); do
  a=$(( (i-1)*4 ))
  echo "  - {name: sw$i, mode: routed, addresses: [10.64.$((a/256)).$((a%256+1))/30]}"
done
} > $DIR/c.yaml
t0=$(date +%s.%N)
ip netns exec $D $BIN run --config $DIR/c.yaml > $DIR/log 2>&1 &
P=$!
for k in $(seq 1 900); do grep -q 'ready' $DIR/log && break; sleep 0.1; done
t1=$(date +%s.%N)
grep -q 'ready' $DIR/log || { echo "not ready:"; tail -5 $DIR/log; }
# Traffic through every twin (ARP both ways, the kernel's replies
# injected): every port's inject socket is open.
(
for i in $(seq 1 $N); do
  a=$(( (i-1)*4 ))
  ip netns exec $T ping -c1 -W1 -I t$i 10.64.$((a/256)).$((a%256+1)) >/dev/null 2>&1 &
  [ $((i % 50)) = 0 ] && wait
done
wait
)
sleep 2
t2=$(date +%s.%N)
kill -TERM $P
wait $P
rc=$?
t3=$(date +%s.%N)
echo "N=$N workers=$W start $(echo "$t1-$t0"|bc) s, stop $(echo "$t3-$t2"|bc) s (exit $rc); load $(cut -d' ' -f1-3 /proc/loadavg)"
grep -i 'stopping:\|stopped:' $DIR/log | cut -c29-200
ip netns del $D; ip netns del $T
rm -rf $DIR
