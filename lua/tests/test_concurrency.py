"""32 clients on one key through the script (the shipped one, on the server's clock): the
limiter grants exactly its limit and never a unit more. Each limiter refills at most one unit
per hour, so over the test's few seconds the most exact arithmetic allows is the limit."""

from __future__ import annotations

import threading

import pytest

from conftest import ScriptServer

CLIENTS = 32
CALLS = 12
LIMIT = 50

CASES = {
    "gcra": (["k"], ["RL.GCRA", str(LIMIT), "1", "1h"]),
    "tokenbucket": (["k"], ["RL.TOKENBUCKET", str(LIMIT), "1", "1h"]),
    "fixed": (["k"], ["RL.FIXED", str(LIMIT), "1000d"]),
    "slidingcounter": (["k"], ["RL.SLIDINGCOUNTER", str(LIMIT), "1000d"]),
    "all": (["{u}a", "{u}b"], ["RL.ALL", "GCRA", str(LIMIT + 5), "1", "1h", "FIXED", str(LIMIT), "1000d"]),
    "besteffort": (["k"], ["RL.GCRA", str(LIMIT), "1", "1h", "COST", "3", "BESTEFFORT"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_no_over_grant(scripts: ScriptServer, case: str) -> None:
    keys, args = CASES[case]
    admin = scripts.client()
    admin.flushall()
    granted: list[int] = []
    errors: list[Exception] = []
    lock = threading.Lock()
    barrier = threading.Barrier(CLIENTS)

    def worker() -> None:
        c = scripts.client()
        try:
            barrier.wait()
            for _ in range(CALLS):
                g = int(c.evalsha(scripts.sha, len(keys), *keys, *args)[0])
                with lock:
                    granted.append(g)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=worker) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(granted) == CLIENTS * CALLS
    # Far more asked than the limit: exactly the limit granted, never more.
    assert sum(granted) == LIMIT, sum(granted)
    admin.close()
