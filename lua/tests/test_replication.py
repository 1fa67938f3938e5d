"""Effects replication: a replica of the script's server ends with exactly the master's values
and expiries (the script writes its resolved state with SET ... PXAT, never a computation a
replica would redo with its own clock)."""

from __future__ import annotations

import random
import time

from conftest import ScriptServer, Server

CALLS = [
    (["a"], ["RL.GCRA", "10", "3", "1s"]),
    (["b"], ["RL.TOKENBUCKET", "5", "7", "1m"]),
    (["c"], ["RL.FIXED", "4", "1h", "OFFSET", "13m"]),
    (["d"], ["RL.SLIDINGCOUNTER", "6", "10s"]),
    (["{x}1", "{x}2"], ["RL.ALL", "GCRA", "8", "1", "1s", "SLIDINGCOUNTER", "5", "1m"]),
]


def test_replica_holds_the_masters_state(scripts: ScriptServer) -> None:
    master = scripts.client()
    master.flushall()
    path, ld = scripts.server.binary, scripts.server.ld_path
    replica_server = Server(path, ["--replicaof", "127.0.0.1", str(scripts.server.port)], ld)
    replica = replica_server.client()
    try:
        deadline = time.time() + 20
        while replica.info("replication").get("master_link_status") != "up":
            assert time.time() < deadline, "the replica did not connect"
            time.sleep(0.05)
        rng = random.Random(7)
        for _ in range(200):
            keys, args = rng.choice(CALLS)
            extra = rng.choice([[], ["COST", str(rng.randint(0, 4))], ["PEEK"], ["BESTEFFORT", "COST", "3"]])
            master.evalsha(scripts.sha, len(keys), *keys, *args, *extra)
        assert master.wait(1, 5000) == 1
        keys = sorted(master.keys("*"))
        assert keys and sorted(replica.keys("*")) == keys
        for k in keys:
            assert replica.get(k) == master.get(k), k
            assert replica.execute_command("PEXPIRETIME", k) == master.execute_command("PEXPIRETIME", k)
    finally:
        replica.close()
        replica_server.stop()
        master.close()
