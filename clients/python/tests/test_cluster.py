"""RateLimiter on redis.RedisCluster: a 3-master cluster on loopback with the module on each
node. Single-key commands route by their key; RL.ALL routes by its hash-tagged keys, and keys
of different slots are refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from redis_ratelimit_client import GCRA, Fixed, RateLimiter
from redis_ratelimit_client.testing import RedisModuleCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisModuleCluster]:
    with RedisModuleCluster(masters=3) as c:
        yield c


@pytest.mark.parametrize("protocol", [2, 3])
def test_cluster_routing(cluster: RedisModuleCluster, protocol: int) -> None:
    client = RedisCluster(host=cluster.host, port=cluster.port, protocol=protocol)
    rl = RateLimiter(client)
    keys = [f"user:{i}:{protocol}" for i in range(12)]
    # The keys spread over the three masters (12 keys, 3 slot ranges).
    nodes = {client.get_node_from_key(k).port for k in keys}
    assert len(nodes) == 3
    for k in keys:
        r = rl.gcra(k, 10, 5, "1s")
        assert (r.granted, r.limit, r.remaining) == (1, 10, 9)
        info = rl.info(k)
        assert info is not None and info.algorithm == "gcra"
    # RL.ALL with one hash tag: one slot, routed to its node.
    tag = f"{{acct{protocol}}}"
    limits = {f"{tag}:s": GCRA(10, 10, "1s"), f"{tag}:d": Fixed(1000, "1d")}
    r = rl.all(limits, cost=3)
    assert (r.granted, r.limit, r.remaining) == (3, 10, 7)
    node = client.get_node_from_key(f"{tag}:s")
    direct = redis.Redis(host=node.host, port=node.port)
    assert direct.exists(f"{tag}:s", f"{tag}:d") == 2
    direct.close()
    # Keys in different slots: refused (by the client before sending, or CROSSSLOT).
    with pytest.raises((redis.exceptions.RedisClusterException, redis.ResponseError)) as e:
        rl.all({keys[0]: GCRA(10, 10, "1s"), keys[1]: GCRA(10, 10, "1s")})
    assert "slot" in str(e.value).lower()
    client.close()
