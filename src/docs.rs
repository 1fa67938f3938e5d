//! What `COMMAND INFO` and `COMMAND DOCS` say of each command: arity, key specs, summary,
//! complexity and arguments. Pure data; `ffi::cmdinfo` hands it to the server at load. Each
//! command's [`CommandDoc`] is in its command file (an algorithm's is `LimiterCommand::DOC`);
//! its row in `commands::table` gives it with the command's name, key spec and ACL categories.

use std::ffi::CStr;

/// How a command uses its key(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// One key at argument 1, read and updated (RW UPDATE).
    Update,
    /// `numkeys` at argument 1, then that many keys, read and updated (RW UPDATE).
    Numkeys,
    /// One key at argument 1, only read (RO ACCESS).
    Read,
    /// `numkeys` at argument 1, then that many keys, only read (RO ACCESS).
    ReadNumkeys,
    /// One key at argument 1, overwritten without being read (OW).
    Overwrite,
    /// Key and value pairs from argument 1, each key overwritten without being read (OW).
    OverwritePairs,
    /// No key (`RL.POLICY`: module state outside the keyspace).
    None,
}

/// An argument's type, as COMMAND DOCS names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    Key,
    Integer,
    String,
    UnixTime,
    PureToken,
}

/// One argument.
#[derive(Debug, Clone, Copy)]
pub struct ArgDoc {
    pub name: &'static CStr,
    pub kind: ArgType,
    /// The option keyword that introduces it (`COST`), if any.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    /// It may repeat (`key [key ...]`).
    pub multiple: bool,
}

/// One command's docs (its name, key spec and ACL categories are in its row of
/// `commands::table`).
#[derive(Debug, Clone, Copy)]
pub struct CommandDoc {
    /// Redis arity: exact when positive, minimum when negative (the name counts).
    pub arity: i32,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// The positional arguments and the command's own options.
    pub args: &'static [ArgDoc],
    /// Whether the shared limiter options follow.
    pub shared_options: bool,
}

/// The module's ACL category (`ACL SETUSER app +@ratelimit`), on servers with module
/// categories (Redis 7.4+, Valkey 8+). Not `gcra` or `rate_limit`: names Redis may take itself.
pub const ACL_CATEGORY: &CStr = c"ratelimit";

/// Version the commands appeared in.
pub const SINCE: &CStr = c"0.1.0";

pub const fn arg(name: &'static CStr, kind: ArgType) -> ArgDoc {
    ArgDoc {
        name,
        kind,
        token: None,
        optional: false,
        multiple: false,
    }
}

pub const fn opt(name: &'static CStr, kind: ArgType, token: &'static CStr) -> ArgDoc {
    ArgDoc {
        name,
        kind,
        token: Some(token),
        optional: true,
        multiple: false,
    }
}

/// `AT t`: the evaluation time, Unix milliseconds.
pub const AT: ArgDoc = opt(c"unix-time-milliseconds", ArgType::UnixTime, c"AT");

/// The options every limiter command takes.
pub const SHARED_OPTIONS: &[ArgDoc] = &[
    opt(c"cost", ArgType::Integer, c"COST"),
    opt(c"peek", ArgType::PureToken, c"PEEK"),
    SHADOW,
    opt(c"besteffort", ArgType::PureToken, c"BESTEFFORT"),
    opt(c"id", ArgType::String, c"DEDUP"),
    opt(c"duration", ArgType::String, c"BLOCK"),
    HOLD,
    AT,
    DETAIL,
];

/// `SHADOW`: evaluate and charge as enforced, never deny (a limit rolled out before it is
/// enforced).
pub const SHADOW: ArgDoc = opt(c"shadow", ArgType::PureToken, c"SHADOW");

/// `HOLD ttl`: the granted units are a reservation under the `DEDUP` id, settled by RL.SETTLE.
pub const HOLD: ArgDoc = opt(c"ttl", ArgType::String, c"HOLD");

/// `DETAIL`: the detailed reply.
pub const DETAIL: ArgDoc = opt(c"detail", ArgType::PureToken, c"DETAIL");

/// `DELAY d`: an option of the schedule algorithms' commands (GCRA, token and leaky bucket) and
/// of RL.ALL, shared by them (inside RL.ALL it applies to the whole call, not to one limiter).
pub const DELAY: ArgDoc = opt(c"delay", ArgType::String, c"DELAY");

pub const KEY: ArgDoc = arg(c"key", ArgType::Key);
