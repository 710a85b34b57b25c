#!/usr/bin/env python3
"""A client that writes its whole pipeline before reading any reply (issue 10 item 5): 10,000 x
ECHO of 10 KB (97 MB) in one sendall, then reads every reply. A server that stops reading while
its write waits deadlocks with such a client (the sendall blocks: reported after 20 s).
Usage: scripts/pipe-before-read.py PORT"""
import socket, sys, time
port=int(sys.argv[1]); n=10000; payload=b"p"*10240
s=socket.create_connection(("127.0.0.1",port)); s.settimeout(20)
req=(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % len(payload) + payload + b"\r\n")*n
t=time.time()
try:
    s.sendall(req)
except socket.timeout:
    print(f"sendall of {len(req)>>20} MB blocked for 20 s: deadlock"); sys.exit()
got=0
while got < n*(len(payload)+10):
    b=s.recv(1<<20)
    if not b: break
    got+=len(b)
print(f"wrote {len(req)>>20} MB before reading, then read {got>>20} MB in {time.time()-t:.2f}s")
