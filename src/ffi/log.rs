//! Server log lines that no text can turn into a panic or a format string: the crate's logging
//! makes a C string with `unwrap` (a NUL panics) and passes the message as the format (a `%`
//! reads arguments that are not there).

use std::ffi::CStr;
use std::os::raw::c_char;

use redis_module::raw;

/// Log `text` at warning level, one server log line per line of text, each made printable
/// ASCII (`\xNN` for other bytes). Does nothing before the module API is loaded (unit tests).
pub fn warning(text: &str) {
    for line in text.lines() {
        log(c"warning", line);
    }
}

fn log(level: &CStr, line: &str) {
    let mut buf = crate::error::printable(line.as_bytes()).into_bytes();
    buf.push(0);
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    if let Some(log) = unsafe { raw::RedisModule_Log } {
        // SAFETY: a NULL context is allowed (logged under a generic module name); the level and
        // the "%s" format are NUL-terminated constants, and `buf` is NUL-terminated with no NUL
        // before the end, passed as the one `%s` argument.
        unsafe {
            log(
                std::ptr::null_mut(),
                level.as_ptr(),
                c"%s".as_ptr(),
                buf.as_ptr().cast::<c_char>(),
            )
        };
    }
}
