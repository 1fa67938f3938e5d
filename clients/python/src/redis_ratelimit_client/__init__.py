"""Typed client, HTTP middleware and test fixtures for the redis-ratelimit module.

import redis
from redis_ratelimit_client import RateLimiter

rl = RateLimiter(redis.Redis())
result = rl.gcra("user:42", burst=10, rate=5, period="1s")
if not result:
    ...  # result.retry_after (seconds, None when never), result.retry_after_header
"""

from ._backend import SCRIPT, BackendName, ModuleRequiredError
from ._commands import install_response_callbacks
from ._http import LimiterTimeoutError, ModuleNotLoadedError, Reserve, client_ip, parse_limit
from ._limiters import (
    GCRA,
    Calendar,
    Concurrency,
    Duration,
    Fixed,
    LeakyBucket,
    Limiter,
    Sliding,
    SlidingCounter,
    Time,
    TokenBucket,
    duration_ms,
)
from ._types import (
    Info,
    LimiterDetail,
    PolicyDefinition,
    RateLimitExceeded,
    Result,
    StreamCount,
    ThrottleResult,
)
from .asyncio import AsyncLease, AsyncRateLimiter
from .client import Lease, RateLimiter
from .headers import rate_limit_headers

__version__ = "0.1.0"

__all__ = [
    "GCRA",
    "SCRIPT",
    "AsyncLease",
    "AsyncRateLimiter",
    "BackendName",
    "Calendar",
    "Concurrency",
    "Duration",
    "Fixed",
    "Info",
    "LeakyBucket",
    "Lease",
    "Limiter",
    "LimiterDetail",
    "LimiterTimeoutError",
    "ModuleNotLoadedError",
    "ModuleRequiredError",
    "PolicyDefinition",
    "RateLimitExceeded",
    "RateLimiter",
    "Reserve",
    "Result",
    "Sliding",
    "SlidingCounter",
    "StreamCount",
    "ThrottleResult",
    "Time",
    "TokenBucket",
    "client_ip",
    "duration_ms",
    "install_response_callbacks",
    "parse_limit",
    "rate_limit_headers",
]
