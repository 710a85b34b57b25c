#!/usr/bin/env python3
"""Memory per key of CLIENT TRACKING's default-mode table: one RESP3 client with tracking on
reads N missing 16-byte keys (pipelined); prints the growth of INFO used_memory per key.

    python3 scripts/bench_tracking_memory.py HOST PORT N

Run it against hyperbloom and redis-server alike (it sets tracking-table-max-keys 0 first, so
nothing is evicted). Used for the issue 14 review note.
"""
import socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def enc(*a):
    o=b'*%d\r\n'%len(a)
    for x in a:
        x=x.encode() if isinstance(x,str) else x
        o+=b'$%d\r\n%s\r\n'%(len(x),x)
    return o
def conn():
    s=socket.create_connection((host,port)); return s
def info_mem(s):
    s.sendall(enc('INFO','memory')); time.sleep(0.2); d=s.recv(1<<20)
    for l in d.split(b'\r\n'):
        if l.startswith(b'used_memory:'): return int(l.split(b':')[1])
a=conn()
a.sendall(enc('CONFIG','SET','tracking-table-max-keys','0')); a.recv(100)
before=info_mem(a)
t=conn(); t.sendall(enc('HELLO','3')+enc('CLIENT','TRACKING','on')); time.sleep(0.2); t.recv(1<<16)
batch=b''.join(enc('GET','key:%012d'%i) for i in range(n))
import threading
th=threading.Thread(target=t.sendall,args=(batch,)); th.start()
got=0; buf=b''
while got < n:
    d=t.recv(1<<20); got += d.count(b'_\r\n')
after=info_mem(a)
print(f"{n} tracked 16-byte keys: used_memory +{after-before} B = {(after-before)/n:.1f} B/key")
