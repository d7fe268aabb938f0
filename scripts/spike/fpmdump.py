import socket, struct, sys, ipaddress, time
# Minimal FPM (netlink) dumper: one line per route message.
port=int(sys.argv[1]); dur=float(sys.argv[2])
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR,1)
s.bind(('127.0.0.1',port)); s.listen(1); s.settimeout(dur)
end=time.time()+dur
conns=0
while time.time()<end:
    try: c,_=s.accept()
    except socket.timeout: break
    conns+=1; print(f"# connection {conns}", flush=True)
    c.settimeout(max(0.1,end-time.time())); buf=b''
    if conns==1 and len(sys.argv)>3:
        # close the first connection after a while to see the replay
        c.settimeout(float(sys.argv[3]))
    while True:
        try: d=c.recv(65536)
        except socket.timeout: break
        if not d: break
        buf+=d
        while len(buf)>=4:
            v,t,l=struct.unpack('!BBH',buf[:4])
            if len(buf)<l: break
            p=buf[4:l]; buf=buf[l:]
            o=0
            while o+16<=len(p):
                ln,ty,fl,seq,pid=struct.unpack('=IHHII',p[o:o+16])
                if ty in (24,25):
                    fam,dl,sl,tos,tbl,proto,scope,rtype,flags=struct.unpack('=BBBBBBBBI',p[o+16:o+28])
                    a=o+28; attrs={}
                    while a+4<=o+ln:
                        al,at=struct.unpack('=HH',p[a:a+4])
                        if al<4: break
                        attrs[at&0x3fff]=p[a+4:a+al]; a+=(al+3)&~3
                    fa=socket.AF_INET if fam==2 else socket.AF_INET6
                    dst=socket.inet_ntop(fa,attrs[1]) if 1 in attrs else ('0.0.0.0' if fam==2 else '::')
                    gw=socket.inet_ntop(fa,attrs[5]) if 5 in attrs else '-'
                    oif=struct.unpack('=I',attrs[4])[0] if 4 in attrs else '-'
                    rta_table=struct.unpack('=I',attrs[15])[0] if 15 in attrs else '-'
                    print(f"{'NEW' if ty==24 else 'DEL'} fam={fam} {dst}/{dl} rtm_table={tbl} RTA_TABLE={rta_table} proto={proto} gw={gw} oif={oif} pid={pid}",flush=True)
                else:
                    print(f"msg type={ty}",flush=True)
                o+=(ln+3)&~3
    c.close()
