#!/usr/bin/python3
"""ceph-server-setup: the monitor commands of entrypoint.sh, through one
librados connection per phase (the ceph CLI costs about a second a call on
two busy cores; this does the whole set-up in well under one).

  ceph-server-setup daemons OSD_UUID OSD_KEY MGR_KEYRING MDS_KEYRING
      wait for the monitor; write the keyrings of mgr.a and mds.a; register
      the OSD with its cephx key (`ceph osd new`); print the OSD's id.
  ceph-server-setup cluster OSD_ID FS POOL CLIENT CLIENT_KEYRING DEADLINE PID...
      wait for the OSD; create the rbd pool (rbd pool init) and the CephFS;
      write client.CLIENT's keyring; wait until health is HEALTH_OK and FS
      has an active MDS, or until DEADLINE (epoch seconds). Exit 3 as soon
      as one of PID... has exited (entrypoint.sh names it).

Errors name the command that failed, with the monitor's message.
"""
import json
import os
import sys
import time

import rados
import rbd

START = float(os.environ.get("CEPH_SERVER_START", time.time()))


def log(msg):
    print("ceph-server: [%3ds] %s" % (time.time() - START, msg), file=sys.stderr, flush=True)


def fail(msg, code=1):
    log("ERROR: " + msg)
    sys.exit(code)


def connect(deadline):
    """Connect as client.admin, retrying until DEADLINE (at least once)."""
    while True:
        cluster = rados.Rados(conffile=os.environ.get("CEPH_CONF", "/etc/ceph/ceph.conf"), name="client.admin")
        # No librados call may hang the start for ever.
        cluster.conf_set("rados_mon_op_timeout", "30")
        cluster.conf_set("rados_osd_op_timeout", "60")
        try:
            cluster.connect(timeout=10)
            return cluster
        except rados.Error as e:
            cluster.shutdown()
            if time.time() >= deadline:
                fail("cannot connect to the monitor as client.admin: %s" % e)
            time.sleep(0.5)


def mon(cluster, what, cmd, inbuf=b"", ok=(0,)):
    """Run a monitor command; fail naming WHAT unless its return is in OK."""
    ret, out, outs = cluster.mon_command(json.dumps(cmd), inbuf, timeout=30)
    if ret not in ok:
        fail("%s failed: %s (%d): %s" % (what, os.strerror(-ret) if ret < 0 else ret, ret, outs.strip()))
    return out


def write(path, data):
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def get_or_create(cluster, entity, caps, path):
    out = mon(cluster, "creating the key of " + entity,
              {"prefix": "auth get-or-create", "entity": entity, "caps": caps})
    write(path, out)


def daemons(osd_uuid, osd_key, mgr_keyring, mds_keyring):
    cluster = connect(time.time() + 60)
    log("mon a up")
    get_or_create(cluster, "mgr.a", ["mon", "allow profile mgr", "osd", "allow *", "mds", "allow *"], mgr_keyring)
    get_or_create(cluster, "mds.a", ["mon", "allow profile mds", "osd", "allow rwx", "mds", "allow",
                                     "mgr", "allow profile mds"], mds_keyring)
    out = mon(cluster, "ceph osd new", {"prefix": "osd new", "uuid": osd_uuid, "format": "json"},
              json.dumps({"cephx_secret": osd_key}).encode())
    print(json.loads(out)["osdid"])
    cluster.shutdown()


def dead(pids):
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return pid
        except FileNotFoundError:
            return pid
    return None


def cluster_setup(osd_id, fs, pool, client, client_keyring, deadline, pids):
    cluster = connect(deadline)

    def wait(what, check):
        last = time.time()
        while True:
            if dead(pids):
                sys.exit(3)
            try:
                if check():
                    return
            except rados.Error as e:
                # Transient while the manager or MDS comes up; the deadline
                # reports it if it is not.
                note = str(e)
            else:
                note = None
            if time.time() > deadline:
                detail = mon(cluster, "ceph health detail", {"prefix": "health", "detail": "detail"}, ok=(0,))
                sys.stderr.write("ceph health detail:\n" + detail.decode(errors="replace"))
                fail("timed out waiting for %s (CEPH_START_TIMEOUT)%s; health detail above"
                     % (what, ": " + note if note else ""))
            if time.time() - last >= 15:
                h = mon(cluster, "ceph health", {"prefix": "health"}).decode().strip()
                log("waiting for %s: %s" % (what, h.splitlines()[0] if h else "?"))
                last = time.time()
            time.sleep(0.5)

    def osd_up():
        d = json.loads(mon(cluster, "ceph osd dump", {"prefix": "osd dump", "format": "json"}))
        return any(o["osd"] == osd_id and o["up"] == 1 for o in d["osds"])

    wait("osd.%d to come up" % osd_id, osd_up)
    log("osd.%d up" % osd_id)

    for p in (pool, fs + "_metadata", fs + "_data"):
        mon(cluster, "creating pool " + p, {"prefix": "osd pool create", "pool": p})
    ioctx = cluster.open_ioctx(pool)
    try:
        rbd.RBD().pool_init(ioctx, False)
    except (rados.Error, rbd.Error) as e:
        fail("rbd pool init %s failed: %s" % (pool, e))
    finally:
        ioctx.close()
    mon(cluster, "ceph fs new " + fs,
        {"prefix": "fs new", "fs_name": fs, "metadata": fs + "_metadata", "data": fs + "_data"})
    # One MDS: no standby to want.
    mon(cluster, "ceph fs set %s standby_count_wanted 0" % fs,
        {"prefix": "fs set", "fs_name": fs, "var": "standby_count_wanted", "val": "0"})
    # A killed client's capabilities are let go once its session is stale:
    # 30 s here, the least Ceph allows (60 s by default), so that the
    # recovery's tests wait half as long for the MDS (docs/recovery.md).
    mon(cluster, "ceph fs set %s session_timeout 30" % fs,
        {"prefix": "fs set", "fs_name": fs, "var": "session_timeout", "val": "30"})
    log("pool %s and file system %s created" % (pool, fs))

    # The caps `ceph fs authorize FS client.CLIENT / rw` gives, plus rbd's
    # profile on the rbd pool.
    get_or_create(cluster, "client." + client, [
        "mon", "profile rbd, allow r fsname=" + fs,
        "osd", "profile rbd pool=%s, allow rw tag cephfs data=%s" % (pool, fs),
        "mds", "allow rw fsname=" + fs,
        "mgr", "profile rbd pool=" + pool,
    ], client_keyring)

    def healthy():
        h = json.loads(mon(cluster, "ceph health", {"prefix": "health", "format": "json"}))
        if h.get("status") != "HEALTH_OK":
            return False
        f = json.loads(mon(cluster, "ceph fs get " + fs, {"prefix": "fs get", "fs_name": fs, "format": "json"}))
        return any(i.get("state") == "up:active" for i in f["mdsmap"]["info"].values())

    wait("HEALTH_OK and an active MDS", healthy)
    cluster.shutdown()


def main(argv):
    if len(argv) == 5 and argv[0] == "daemons":
        daemons(*argv[1:])
    elif len(argv) >= 7 and argv[0] == "cluster":
        cluster_setup(int(argv[1]), argv[2], argv[3], argv[4], argv[5], float(argv[6]), [int(p) for p in argv[7:]])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
