#!/usr/bin/env bash
# Build zebra-mpls/zebra_lanyard.so (the zebra module that turns MPLS on and
# hands labels and pseudowires to Lanyard; see docs/mpls.md) against the
# source of the installed FRR package, and install it as
#   /usr/local/lib/lanyard/zebra_lanyard.so
# Only what the module needs is built: the source is configured with
# Debian's feature flags (for config.h), one generated header is made, and
# one C file is compiled (about 1 s; the first run also downloads and
# configures the source, about 1-2 min). Idempotent; run as root.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
# LANYARD_MODULE_DIR: build elsewhere (e.g. to try a changed module
# without replacing the installed one).
out_dir="${LANYARD_MODULE_DIR:-/usr/local/lib/lanyard}"
cache=/var/cache/lanyard
ver="$(dpkg-query -W -f='${Version}' frr 2>/dev/null || true)"
if [ -z "$ver" ]; then
  echo "build-zebra-mpls: frr is not installed" >&2
  exit 1
fi
upstream="${ver%%-*}"
src="$cache/frr-$ver"
export DEBIAN_FRONTEND=noninteractive

# Source packages: Debian 12 images ship without deb-src entries.
srcs="$(apt-cache showsrc frr 2>/dev/null || true)"
if ! grep -qxF "Version: $ver" <<<"$srcs"; then
  echo "build-zebra-mpls: adding deb-src entries for bookworm"
  cat > /etc/apt/sources.list.d/lanyard-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt-get update -qq
fi

# What configure needs (Debian's Build-Depends, minus docs, SNMP, RPKI).
deps=(gcc make dpkg-dev pkg-config autoconf automake libtool bison flex gawk
      libyang2-dev libjson-c-dev libelf-dev libpython3-dev libc-ares-dev libcap-dev)
missing=()
for p in "${deps[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-zebra-mpls: installing ${missing[*]}"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f "$src/config.h" ] || [ ! -f "$src/lib/route_types.h" ]; then
  rm -rf "$src" "$cache/dl"
  mkdir -p "$cache/dl"
  (cd "$cache/dl" && apt-get source --download-only "frr=$ver" >/dev/null 2>&1 \
     || apt-get source --download-only "frr=$ver")
  dpkg-source -x "$cache/dl/frr_$ver.dsc" "$src" >/dev/null
  rm -rf "$cache/dl"
  echo "build-zebra-mpls: configuring frr $upstream (config.h only)"
  (cd "$src" && ./bootstrap.sh >/dev/null 2>&1 && ./configure \
     --localstatedir=/var/run/frr --sbindir=/usr/lib/frr --sysconfdir=/etc/frr \
     --libdir=/usr/lib/x86_64-linux-gnu/frr \
     --with-moduledir=/usr/lib/x86_64-linux-gnu/frr/modules \
     --disable-dependency-tracking --disable-rpki --disable-scripting --disable-doc \
     --disable-snmp --enable-fpm --disable-protobuf --disable-zeromq --enable-ospfapi \
     --enable-bgp-vnc --enable-multipath=256 --enable-user=frr --enable-group=frr \
     --enable-vty-group=frrvty --enable-configfile-mask=0640 \
     --enable-logfile-mask=0640 --disable-vtysh >"$src/lanyard-configure.log" 2>&1) || {
       echo "build-zebra-mpls: configure failed, see $src/lanyard-configure.log" >&2
       rm -f "$src/config.h"
       exit 1
     }
  make -C "$src" lib/route_types.h >/dev/null
fi

mkdir -p "$out_dir"
gcc -O2 -g -fPIC -shared -Wall -Wextra -Werror -Wno-unused-parameter \
  -Wno-missing-field-initializers -DHAVE_CONFIG_H \
  -I"$src" -I"$src/lib" -I"$src/include" \
  -o "$out_dir/zebra_lanyard.so.tmp" "$here/zebra-mpls/zebra_lanyard.c"
mv "$out_dir/zebra_lanyard.so.tmp" "$out_dir/zebra_lanyard.so"
# The FPM module with netns VRFs named by NSID (docs/vrf.md): FRR's own
# dplane_fpm_nl.c from this source, one small patch, built the same way.
# Loaded *instead of* -M dplane_fpm_nl.
fpm_tmp="$(mktemp -d)"
cp "$src/zebra/dplane_fpm_nl.c" "$fpm_tmp/dplane_fpm_nl.c"
patch -s -d "$fpm_tmp" -p2 < "$here/zebra-mpls/fpm-netns-vrf.patch"
gcc -O2 -g -fPIC -shared -Wall -Wextra -Werror -Wno-unused-parameter \
  -Wno-missing-field-initializers -Wno-sign-compare -DHAVE_CONFIG_H \
  -I"$src" -I"$src/lib" -I"$src/include" \
  -o "$out_dir/zebra_lanyard_fpm.so.tmp" "$fpm_tmp/dplane_fpm_nl.c"
rm -rf "$fpm_tmp"
mv "$out_dir/zebra_lanyard_fpm.so.tmp" "$out_dir/zebra_lanyard_fpm.so"
# Every symbol the module takes from zebra must exist in this zebra.
have="$(nm -D --defined-only /usr/lib/frr/zebra /usr/lib/x86_64-linux-gnu/frr/libfrr.so.0 | awk '{print $3}')"
have="$have
$(nm -D --defined-only /lib/x86_64-linux-gnu/libjson-c.so.5 | awk '{sub(/@.*/, "", $3); print $3}')"
for s in $(nm -D --undefined-only "$out_dir/zebra_lanyard.so" "$out_dir/zebra_lanyard_fpm.so" | awk '$1=="U" && $2 !~ /@/ {print $2}' | sort -u); do
  grep -qxF "$s" <<<"$have" || { echo "build-zebra-mpls: zebra lacks $s" >&2; exit 1; }
done
echo "build-zebra-mpls: $out_dir/zebra_lanyard.so, zebra_lanyard_fpm.so (frr $ver)"
