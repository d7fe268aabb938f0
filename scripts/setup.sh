#!/usr/bin/env bash
# Install what Lanyard's tests and test bed need on a fresh Debian machine
# (run as root). Idempotent: skips packages already present.
set -euo pipefail
pkgs=(iproute2 iputils-ping ethtool tcpdump tshark python3-scapy netsniff-ng openvswitch-switch frr nfdump
  chromium prometheus python3-aiosmtpd libndpi-dev snmpd snmp snmptrapd aria2 nftables amule-daemon)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # tshark asks whether non-root users may capture: answer no, quietly.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Open vSwitch package starts its daemons on the host; the lab runs its
# own private instances per namespace, so the host ones are not needed.
if command -v systemctl >/dev/null 2>&1; then
  systemctl stop openvswitch-switch >/dev/null 2>&1 || true
  # Likewise FRR: tests start their own zebra in private namespaces.
  systemctl stop frr >/dev/null 2>&1 || true
  # Prometheus: the metrics test runs its own server in a namespace.
  systemctl disable --now prometheus >/dev/null 2>&1 || true
  # snmpd: the SNMP test runs its own agent with a private config.
  systemctl disable --now snmpd >/dev/null 2>&1 || true
  # snmptrapd: the same test runs a private trap receiver.
  systemctl disable --now snmptrapd >/dev/null 2>&1 || true
fi
# The zebra module that hands FRR's labels and pseudowires to Lanyard
# (docs/mpls.md), built against the installed FRR's source package.
"$(dirname "$0")/build-zebra-mpls.sh"
echo "setup: ok"
