//! The server's clock in Unix microseconds.

use redis_module::raw;

use crate::core::Micros;

/// Now, in Unix µs: `RedisModule_CachedMicroseconds` where the server has it (7.2+, Valkey; the
/// same value for a whole command, script or transaction), else `clock_gettime(CLOCK_REALTIME)`
/// (Redis 7.0 has only a millisecond API, too coarse for rates above 1000/s).
pub fn server_now() -> Micros {
    // SAFETY: reading a function pointer the module API filled in at load; copied by value so no
    // reference to the `static mut` is created.
    let cached = unsafe { raw::RedisModule_CachedMicroseconds };
    if let Some(f) = cached {
        // SAFETY: the API function takes no arguments and is called on the main thread.
        let us = unsafe { f() };
        return u64::try_from(us).unwrap_or(0);
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_REALTIME always exists.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if rc != 0 {
        return 0;
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let micros = u64::try_from(ts.tv_nsec).unwrap_or(0) / 1_000;
    secs.saturating_mul(1_000_000).saturating_add(micros)
}
