import socket, struct, sys, time
# FPM (netlink) dumper with labels: one line per route message, AF_MPLS
# entries (in-label, out-labels, via, oif) and IP routes with their MPLS
# encap per next hop (RTA_MULTIPATH included), and the table id.
# Usage: fpmdump-mpls.py PORT SECONDS   (docs/vrf.md, "VPNv4 spike")
port = int(sys.argv[1]); dur = float(sys.argv[2])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', port)); s.listen(1); s.settimeout(dur)
end = time.time() + dur


def attrs_of(b):
    a, out = 0, {}
    while a + 4 <= len(b):
        al, at = struct.unpack('=HH', b[a:a + 4])
        if al < 4:
            break
        out[at & 0x3fff] = b[a + 4:a + al]
        a += (al + 3) & ~3
    return out


def labels(b):
    return [struct.unpack('!I', b[i:i + 4])[0] >> 12 for i in range(0, len(b), 4)]


def addr(fam, b):
    fa = socket.AF_INET if fam == 2 else socket.AF_INET6
    return socket.inet_ntop(fa, b)


def hop(fam, at, oif):
    s = []
    if 5 in at:
        s.append('gw=' + addr(fam, at[5]))
    if 18 in at:  # RTA_VIA: family + address
        vf = struct.unpack('=H', at[18][:2])[0]
        s.append('via=' + addr(vf, at[18][2:]))
    if oif is not None:
        s.append(f'oif={oif}')
    if 19 in at:  # RTA_NEWDST
        s.append(f'out={labels(at[19])}')
    if 22 in at:  # RTA_ENCAP (MPLS_IPTUNNEL_DST = 1)
        e = attrs_of(at[22])
        if 1 in e:
            s.append(f'push={labels(e[1])}')
    return ' '.join(s)


conns = 0
while time.time() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        break
    conns += 1; print(f'# connection {conns}', flush=True)
    c.settimeout(max(0.1, end - time.time())); buf = b''
    while True:
        try:
            d = c.recv(65536)
        except socket.timeout:
            break
        if not d:
            break
        buf += d
        while len(buf) >= 4:
            v, t, l = struct.unpack('!BBH', buf[:4])
            if len(buf) < l:
                break
            p = buf[4:l]; buf = buf[l:]
            o = 0
            while o + 16 <= len(p):
                ln, ty, fl, seq, pid = struct.unpack('=IHHII', p[o:o + 16])
                if ty in (24, 25):
                    fam, dl, sl, tos, tbl, proto, scope, rtype, flags = struct.unpack('=BBBBBBBBI', p[o + 16:o + 28])
                    at = attrs_of(p[o + 28:o + ln])
                    table = struct.unpack('=I', at[15])[0] if 15 in at else tbl
                    if fam == 28:
                        dst = f'label {labels(at[1])[0]}' if 1 in at else '?'
                    else:
                        dst = (addr(fam, at[1]) if 1 in at else 'default') + f'/{dl}'
                    oif = struct.unpack('=I', at[4])[0] if 4 in at else None
                    hops = []
                    if 9 in at:  # RTA_MULTIPATH
                        m = at[9]; k = 0
                        while k + 8 <= len(m):
                            rl, rf, rh, ri = struct.unpack('=HBBi', m[k:k + 8])
                            hops.append(hop(fam, attrs_of(m[k + 8:k + rl]), ri))
                            k += (rl + 3) & ~3
                    else:
                        hops.append(hop(fam, at, oif))
                    print(f"{'NEW' if ty == 24 else 'DEL'} fam={fam} {dst} table={table} proto={proto} "
                          + ' | '.join(hops), flush=True)
                o += (ln + 3) & ~3
    c.close()
