"""RateLimiter on redis.RedisCluster: a 3-master cluster on loopback with the module on each
node. Single-key commands route by their key; RL.ALL and RL.SETTLE route by their hash-tagged
keys, and keys of different slots are refused."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from redis_ratelimit_client import GCRA, Fixed, RateLimiter, TokenBucket
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


@pytest.mark.parametrize("protocol", [2, 3])
def test_cluster_hold_and_settle(cluster: RedisModuleCluster, protocol: int) -> None:
    client = RedisCluster(host=cluster.host, port=cluster.port, protocol=protocol)
    rl = RateLimiter(client)
    # One hash tag per master: RL.SETTLE routes by its keys like RL.ALL.
    tags: dict[int, str] = {}
    for i in range(24):
        tag = f"{{gw{protocol}:{i}}}"
        tags.setdefault(client.get_node_from_key(tag).port, tag)
    assert len(tags) == 3
    now = int(time.time() * 1000)
    for tag in tags.values():
        keys = [f"{tag}:rpm", f"{tag}:tpm"]
        limits = {keys[0]: GCRA(60, 60, "1m"), keys[1]: TokenBucket(9000, 9000, "1m", charge=3000)}
        assert rl.all(limits, dedup="req", hold="30s", at=now).allowed
        # 1000 of the 3000 tokens used: 8000 left (no refill at one AT).
        settled = rl.settle(keys, "req", [1, 1000], at=now)
        assert [(s.granted, s.remaining) for s in settled if s is not None] == [
            (1, 59),
            (1000, 8000),
        ]
    a, b = list(tags.values())[:2]
    with pytest.raises((redis.exceptions.RedisClusterException, redis.ResponseError)) as e:
        rl.settle([f"{a}:rpm", f"{b}:rpm"], "req", [1, 1])
    assert "slot" in str(e.value).lower()
    client.close()
