#!/bin/bash
# Spike: VPNv6 (with VPNv4 alongside) between two FRR PEs with netns VRFs
# (zebra -n, both Lanyard modules), over OSPF + LDP (P-less), IPv4 core. One
# VRF CUSTA per PE; A routes 192.0.2.0/24 and 2001:db8:a::/48 to its CE, B
# 198.51.100.0/24 and 2001:db8:b::/48; bgpd exports them with `label vpn
# export auto` (one label per address family); the VPNv6 BGP next hop is
# the IPv4-mapped loopback. Prints PE A's RIB, labels and the FPM stream
# (docs/vrf.md, "VPNv6"). LANYARD_MODULE_DIR: try modules built elsewhere.
# Usage: vpnv6.sh [label-if|label-if-vrf-only|no-label-if]
#   label-if: each VRF namespace gets an interface named like the VRF
#   (the per-VRF label's LSP points to it, zapi_msg.c zread_vrf_label),
#   one end of a veth whose other end, in the PE's namespace, has the
#   same ifindex; label-if-vrf-only: only the interface in the VRF.
set -u
MODE=${1:-label-if}
P=lyv6$$
D=$(mktemp -d /tmp/lyv6-XXXX); echo "output in $D"
FPM=${LANYARD_MODULE_DIR:-/usr/local/lib/lanyard}/zebra_lanyard_fpm.so
MPLS=${LANYARD_MODULE_DIR:-/usr/local/lib/lanyard}/zebra_lanyard.so
cleanup() {
  for pe in a b; do
    for f in $D/$pe/*.pid; do [ -f "$f" ] && kill $(cat $f) 2>/dev/null; done
  done
  sleep 0.5
  for n in $P-a $P-b $P-a-C $P-b-C $P-a-ce $P-b-ce; do ip netns del $n 2>/dev/null; done
  rm -rf $D
}
trap cleanup EXIT
for pe in a b; do
  ip netns add $P-$pe; ip -n $P-$pe link set lo up
  ip netns add $P-$pe-C; ip -n $P-$pe-C link set lo up
  ip netns add $P-$pe-ce; ip -n $P-$pe-ce link set lo up
done
ip link add core netns $P-a type veth peer name core netns $P-b
ip -n $P-a addr add 10.0.12.1/24 dev core; ip -n $P-b addr add 10.0.12.2/24 dev core
ip -n $P-a addr add 10.255.0.1/32 dev lo; ip -n $P-b addr add 10.255.0.2/32 dev lo
for pe in a b; do
  ip -n $P-$pe link set core up
  # NSID of the VRF namespace in the PE's namespace = the VRF's table.
  ip netns exec $P-$pe ip netns set $P-$pe-C 1001
  # VRF interface toward the CE (the customer subnet is the same on both).
  ip link add cust netns $P-$pe-C type veth peer name ce netns $P-$pe-ce
  ip -n $P-$pe-C addr add 10.1.0.1/24 dev cust; ip -n $P-$pe-C link set cust up
  ip -n $P-$pe-ce addr add 10.1.0.2/24 dev ce; ip -n $P-$pe-ce link set ce up
  ip -n $P-$pe-C addr add 2001:db8:1::1/64 dev cust nodad
  ip -n $P-$pe-ce addr add 2001:db8:1::2/64 dev ce nodad
  if [ "$MODE" = label-if ]; then
    # zebra activates the label's LSP only if its ifindex is an operative
    # interface of zebra's *own* namespace (zebra_mpls.c
    # nhlfe_nexthop_active, NEXTHOP_TYPE_IFINDEX): the same ifindex on
    # both ends of a veth, one end in each namespace.
    ip -n $P-$pe link add lyv-CUSTA index 3001 type veth peer name CUSTA index 3001 netns $P-$pe-C
    ip -n $P-$pe-C link set CUSTA up; ip -n $P-$pe link set lyv-CUSTA up
  elif [ "$MODE" = label-if-vrf-only ]; then
    ip -n $P-$pe-C link add CUSTA type veth peer name CUSTAx
    ip -n $P-$pe-C link set CUSTA up; ip -n $P-$pe-C link set CUSTAx up
  fi
  mkdir -p $D/$pe/netns; touch $D/$pe/netns/CUSTA
done
conf() { # pe id prefix prefix6
  cat > $D/$1/zebra.conf <<C
fpm address 127.0.0.1 port 2698
no fpm use-next-hop-groups
C
  cat > $D/$1/staticd.conf <<C
vrf CUSTA
 ip route $3 10.1.0.2
 ipv6 route $4 2001:db8:1::2
exit-vrf
C
  cat > $D/$1/ospfd.conf <<C
interface core
 ip ospf area 0
 ip ospf network point-to-point
 ip ospf hello-interval 1
 ip ospf dead-interval 4
interface lo
 ip ospf area 0
router ospf
 ospf router-id 10.255.0.$2
C
  cat > $D/$1/ldpd.conf <<C
mpls ldp
 router-id 10.255.0.$2
 address-family ipv4
  discovery transport-address 10.255.0.$2
  interface core
 exit-address-family
C
  other=$((3 - $2))
  cat > $D/$1/bgpd.conf <<C
router bgp 65000
 bgp router-id 10.255.0.$2
 no bgp default ipv4-unicast
 neighbor 10.255.0.$other remote-as 65000
 neighbor 10.255.0.$other update-source 10.255.0.$2
 neighbor 10.255.0.$other timers connect 2
 address-family ipv4 vpn
  neighbor 10.255.0.$other activate
 exit-address-family
 address-family ipv6 vpn
  neighbor 10.255.0.$other activate
 exit-address-family
exit
router bgp 65000 vrf CUSTA
 address-family ipv4 unicast
  redistribute static
  label vpn export auto
  rd vpn export 65000:1
  rt vpn both 65000:1
  export vpn
  import vpn
 exit-address-family
 address-family ipv6 unicast
  redistribute static
  label vpn export auto
  rd vpn export 65000:1
  rt vpn both 65000:1
  export vpn
  import vpn
 exit-address-family
exit
C
}
conf a 1 192.0.2.0/24 2001:db8:a::/48
conf b 2 198.51.100.0/24 2001:db8:b::/48
chown -R frr:frr $D
ip netns exec $P-a timeout 60 python3 $(dirname "$0")/fpmdump-mpls.py 2698 45 > $D/fpm.txt 2>&1 &
DUMP=$!
for pe in a b; do
  W=$D/$pe
  ip netns exec $P-$pe unshare -m sh -c "
    mount --make-rprivate /
    mount --bind /run/netns/$P-$pe-C $W/netns/CUSTA
    mount --rbind $W/netns /run/netns
    for d in zebra staticd ospfd ldpd bgpd; do
      x=''
      [ \$d = zebra ] && x='-n -M $FPM -M $MPLS:/nonexistent.sock'
      [ \$d = ldpd ] && x='--ctl_socket $W'
      /usr/lib/frr/\$d -d -f $W/\$d.conf -i $W/\$d.pid -z $W/zserv.api --vty_socket $W -A 127.0.0.1 -P 0 \$x --log file:$W/\$d.log
      [ \$d = zebra ] && sleep 1
    done
  "
done
sleep 35
V="ip netns exec $P-a vtysh --vty_socket $D/a"
$V -c 'show ip ospf neighbor' -c 'show mpls ldp neighbor' -c 'show bgp summary' \
   -c 'show bgp ipv6 vpn' -c 'show ipv6 route vrf CUSTA' -c 'show mpls table' \
   -c 'show bgp vrf CUSTA ipv6 unicast 2001:db8:b::/48' -c 'show ipv6 route vrf CUSTA 2001:db8:b::/48' > $D/rib.txt 2>&1
grep -i "vrf label\|Unable to find\|label" $D/a/zebra.log | head -5 >> $D/rib.txt
wait $DUMP
cat $D/rib.txt
echo "===== FPM stream at PE A ====="
grep -v "fam=2 .*proto=2 " $D/fpm.txt | sort | uniq -c | sort -rn | head -40
