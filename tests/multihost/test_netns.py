"""The test-host fixture itself: hosts reach each other only over their bridge, a cut link cuts, everything is
removed by close(), and stale networks are removed only when they are this module's and their owner is gone."""

from __future__ import annotations

import subprocess
import sys

import netns

SERVE = ("import socket,sys\ns=socket.socket();s.bind(('0.0.0.0',int(sys.argv[1])));s.listen();print('up',flush=True)\n"
         "while True: c,_=s.accept();c.sendall(socket.gethostname().encode());c.close()\n")
ASK = ("import socket,sys\ntry:\n c=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=2);"
       "print(c.recv(100).decode())\nexcept OSError as e: print('unreachable', e)\n")


def _objects(tag: str) -> list[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return [w for w in (names + links).split() if tag in w] + [p.name for p in netns.ETC_NETNS.glob(f"*{tag}*")]


def test_hosts_talk_over_their_bridge_cut_and_teardown(network):
    net = network(2)
    server = net.popen(1, [sys.executable, "-c", SERVE, "7001"], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "up"
    ask = [sys.executable, "-c", ASK, net.hosts[1].addr, "7001"]
    assert net.run(0, ask).stdout.strip() == "h1"  # its own host name, through its own address
    assert net.run(0, [sys.executable, "-c", ASK, "127.0.0.1", "7001"]).stdout.startswith("unreachable")
    net.cut(1)
    assert net.run(0, ask).stdout.startswith("unreachable")
    net.reconnect(1)
    assert net.run(0, ask).stdout.strip() == "h1"
    assert _objects(net.tag)
    net.close()
    assert server.poll() is not None  # the processes it started are gone
    assert _objects(net.tag) == []


def test_remove_stale_takes_only_networks_whose_owner_is_gone(network):
    live, stale = network(1), network(1)
    dead = subprocess.Popen(["true"])
    dead.wait()
    subprocess.run(["ip", "link", "set", stale.bridge, "alias", f"{netns.ALIAS}{dead.pid}"], check=True)
    removed = netns.remove_stale()
    assert stale.tag in removed and live.tag not in removed
    assert _objects(stale.tag) == [] and _objects(live.tag)
