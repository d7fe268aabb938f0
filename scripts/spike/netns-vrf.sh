#!/bin/bash
# Spike: zebra -n with two netns VRFs holding identical prefixes; FPM stream dumped.
# Usage: netns-vrf.sh stock|lanyard   (docs/vrf.md, "The spike"); prints the FPM stream.
set -u
P=lyvs$$
D=$(mktemp -d /tmp/lyvs-XXXX); mkdir -p $D/netns; echo "output in $D"
FR=$P-fr
cleanup() {
  [ -f $D/zebra.pid ] && kill $(cat $D/zebra.pid) 2>/dev/null
  [ -f $D/staticd.pid ] && kill $(cat $D/staticd.pid) 2>/dev/null
  sleep 0.5
  for n in $FR $P-A $P-B; do ip netns del $n 2>/dev/null; done
  rm -rf $D
}
trap cleanup EXIT
ip netns add $FR; ip -n $FR link set lo up
for v in A B; do
  ip netns add $P-$v
  ip -n $P-$v link set lo up
  ip -n $P-$v link add v0 type veth peer name v1
  ip -n $P-$v link set v0 up; ip -n $P-$v link set v1 up
  ip -n $P-$v addr add 10.1.0.1/24 dev v0
  ip -n $P-$v addr add 2001:db8:1::1/64 dev v0 nodad
  touch $D/netns/CUST$v
done
# Lanyard would set these: the NSID of each VRF namespace seen from zebra's.
if [ "$1" = lanyard ]; then
  ip netns exec $FR ip netns set $P-A 1001
  ip netns exec $FR ip netns set $P-B 1002
fi
ip netns exec $FR ip netns list-id 2>/dev/null | head
if [ "$1" = lanyard ]; then MOD=/usr/local/lib/lanyard/zebra_lanyard_fpm.so; else MOD=dplane_fpm_nl; fi
cat > $D/zebra.conf <<C
fpm address 127.0.0.1 port 2699
no fpm use-next-hop-groups
C
cat > $D/staticd.conf <<C
vrf CUSTA
 ip route 192.0.2.0/24 10.1.0.2
 ipv6 route 2001:db8:99::/48 2001:db8:1::2
exit-vrf
vrf CUSTB
 ip route 192.0.2.0/24 10.1.0.3
 ipv6 route 2001:db8:99::/48 2001:db8:1::3
exit-vrf
ip route 198.51.100.0/24 blackhole
C
chown -R frr:frr $D
ip netns exec $FR timeout 25 python3 $(dirname "$0")/fpmdump.py 2699 22 10 > $D/fpm.txt 2>&1 &
DUMP=$!
# zebra sees only this spike's VRF namespaces, under the VRF names.
ip netns exec $FR unshare -m sh -c "
  mount --make-rprivate /
  for v in A B; do mount --bind /run/netns/$P-\$v $D/netns/CUST\$v; done
  mount --rbind $D/netns /run/netns
  /usr/lib/frr/zebra -d -n -M $MOD -f $D/zebra.conf -i $D/zebra.pid -z $D/zserv.api --vty_socket $D -A 127.0.0.1 -P 0 --log file:$D/zebra.log
  /usr/lib/frr/staticd -d -f $D/staticd.conf -i $D/staticd.pid -z $D/zserv.api --vty_socket $D -A 127.0.0.1 -P 0 --log file:$D/staticd.log
"
sleep 6
ip netns exec $FR vtysh --vty_socket $D -c 'show vrf' -c 'show ip route vrf all' -c 'show ipv6 route vrf all' > $D/rib.txt 2>&1
wait $DUMP
cat $D/rib.txt $D/fpm.txt
