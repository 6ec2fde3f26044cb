#!/usr/bin/env python3
"""A file system that stalls: a FUSE server, on /dev/fuse itself, whose root
holds one haproxy.cfg of 7 bytes whose reads are never answered (a hung
network mount). An interrupted read ends with EINTR, as libfuse's do. Needs
root. Prints "mounted" once it serves; ends when unmounted.
usage: stallfs.py MOUNTPOINT"""
import ctypes, os, stat, struct, sys

mountpoint = sys.argv[1]
fuse = os.open("/dev/fuse", os.O_RDWR)
libc = ctypes.CDLL(None, use_errno=True)
options = f"fd={fuse},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
MS_NOSUID, MS_NODEV = 0x2, 0x4
if libc.mount(b"stallfs", mountpoint.encode(), b"fuse", MS_NOSUID | MS_NODEV, options) != 0:
    sys.exit("mount: " + os.strerror(ctypes.get_errno()))
print("mounted", flush=True)

ROOT, CONFIG = 1, 2


def attr(node):
    mode, size, links = (stat.S_IFDIR | 0o755, 0, 2) if node == ROOT else (stat.S_IFREG | 0o644, 7, 1)
    return struct.pack("<QQQQQQIIIIIIIIII", node, size, 1, 0, 0, 0, 0, 0, 0, mode, links, 0, 0, 0, 4096, 0)


def reply(unique, data=b"", errno=0):
    os.write(fuse, struct.pack("<IiQ", 16 + len(data), -errno, unique) + data)


unanswered = set()
while True:
    try:
        request = os.read(fuse, 1 << 20)
    except OSError as e:
        if e.errno == 19:  # ENODEV: unmounted
            break
        raise
    _, op, unique, node = struct.unpack_from("<IIQQ", request)
    body = request[40:]
    if op == 26:  # INIT
        reply(unique, struct.pack("<IIIIHHI", 7, 19, 0, 0, 16, 12, 4096))
    elif op == 1:  # LOOKUP
        if node == ROOT and body.split(b"\0")[0] == b"haproxy.cfg":
            reply(unique, struct.pack("<QQQQII", CONFIG, 0, 1, 1, 0, 0) + attr(CONFIG))
        else:
            reply(unique, errno=2)
    elif op == 3:  # GETATTR
        reply(unique, struct.pack("<QII", 1, 0, 0) + attr(node))
    elif op in (14, 27):  # OPEN, OPENDIR
        reply(unique, struct.pack("<QII", 0, 0, 0))
    elif op == 28:  # READDIR
        entries = b""
        if struct.unpack_from("<QQI", body)[1] == 0:
            for i, (ino, name, kind) in enumerate([(ROOT, b".", 4), (ROOT, b"..", 4), (CONFIG, b"haproxy.cfg", 8)]):
                entry = struct.pack("<QQII", ino, i + 1, len(name), kind) + name
                entries += entry + b"\0" * (-len(entry) % 8)
        reply(unique, entries)
    elif op == 15:  # READ: never answered
        unanswered.add(unique)
    elif op == 36:  # INTERRUPT
        interrupted = struct.unpack_from("<Q", body)[0]
        if interrupted in unanswered:
            unanswered.discard(interrupted)
            reply(interrupted, errno=4)
    elif op in (18, 29, 25):  # RELEASE, RELEASEDIR, FLUSH
        reply(unique)
    elif op == 38:  # DESTROY
        break
    else:
        reply(unique, errno=38)  # ENOSYS
