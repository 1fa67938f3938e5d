"""Typed client, HTTP middleware and test fixtures for the redis-ratelimit module.

import redis
from redis_ratelimit_client import RateLimiter

rl = RateLimiter(redis.Redis())
result = rl.gcra("user:42", burst=10, rate=5, period="1s")
if not result:
    ...  # result.retry_after (None when never), result.retry_after_header
"""

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
    "AsyncLease",
    "AsyncRateLimiter",
    "Calendar",
    "Concurrency",
    "Duration",
    "Fixed",
    "Info",
    "LeakyBucket",
    "Lease",
    "Limiter",
    "LimiterDetail",
    "PolicyDefinition",
    "RateLimitExceeded",
    "RateLimiter",
    "Result",
    "Sliding",
    "SlidingCounter",
    "StreamCount",
    "ThrottleResult",
    "Time",
    "TokenBucket",
    "duration_ms",
    "rate_limit_headers",
]
