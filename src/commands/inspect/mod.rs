//! Reading what the module holds, changing nothing: RL.INFO (any limiter key) and RL.METRICS
//! (the counters of `INFO ratelimit`, for redis_exporter).

pub mod info;
pub mod metrics;
