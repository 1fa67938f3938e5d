//! What `COMMAND INFO` and `COMMAND DOCS` say of each command: arity, key specs, summary,
//! complexity and arguments. Pure data; `ffi::cmdinfo` hands it to the server at load. Each
//! algorithm's command carries its own [`CommandDoc`] (`LimiterCommand::DOC`, listed by the
//! registry); [`OTHERS`] are the commands that are not one algorithm's.

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
    /// One key at argument 1, overwritten without being read (OW).
    Overwrite,
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

/// One command.
#[derive(Debug, Clone, Copy)]
pub struct CommandDoc {
    pub name: &'static CStr,
    /// Redis arity: exact when positive, minimum when negative (the name counts).
    pub arity: i32,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub keys: Keys,
    /// The positional arguments and the command's own options.
    pub args: &'static [ArgDoc],
    /// Whether the shared limiter options follow.
    pub shared_options: bool,
    /// Redis ACL categories (`write fast`, `read fast`, ...), so users granted those categories
    /// can run the command. The module's own category [`ACL_CATEGORY`] is added where the
    /// server supports module categories, except to administration commands
    /// ([`CommandDoc::in_module_category`]).
    pub acl: &'static CStr,
}

/// The ACL category of administration commands: a command in it is in no category that lets
/// applications rate-limit, the module's own included.
pub const ADMIN: &[u8] = b"admin";

impl CommandDoc {
    /// Whether the command is in the module's category [`ACL_CATEGORY`]: every command
    /// applications use is, administration commands (in `@admin`, such as the internal
    /// RL._SET and RL._RESTORE, which write raw state) are not.
    pub fn in_module_category(&self) -> bool {
        !self
            .acl
            .to_bytes()
            .split(|&b| b == b' ')
            .any(|c| c == ADMIN)
    }
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
    opt(c"besteffort", ArgType::PureToken, c"BESTEFFORT"),
    opt(c"id", ArgType::String, c"DEDUP"),
    opt(c"duration", ArgType::String, c"BLOCK"),
    AT,
];

/// `DELAY d`: an option of the schedule algorithms' commands (GCRA, token and leaky bucket) and
/// of RL.ALL, shared by them (inside RL.ALL it applies to the whole call, not to one limiter).
pub const DELAY: ArgDoc = opt(c"delay", ArgType::String, c"DELAY");

pub const KEY: ArgDoc = arg(c"key", ArgType::Key);

/// The commands that are not one algorithm's, internal ones included.
pub const OTHERS: &[CommandDoc] = &[
    CommandDoc {
        name: c"rl.all",
        arity: -4,
        summary: c"Apply several limiters to one request, all or nothing: granted only if every limiter grants it",
        complexity: c"O(N) where N is the number of limiters",
        keys: Keys::Numkeys,
        args: &[
            arg(c"numkeys", ArgType::Integer),
            ArgDoc {
                multiple: true,
                ..KEY
            },
            ArgDoc {
                multiple: true,
                ..arg(c"limiter", ArgType::String)
            },
            DELAY,
        ],
        shared_options: true,
        acl: c"write fast",
    },
    CommandDoc {
        name: c"rl.streamcount",
        arity: -3,
        summary: c"Sliding-window counter on a Redis stream (the classic Lua layout): add to the window's total, optionally under a limit",
        complexity: c"O(1) amortized: a running total reads only the entries that entered or left the window since the last call; O(N) in the window's entries for the first call on a key, and after a change other than an append or a trim (XDEL, DEL, RENAME, a flush...)",
        keys: Keys::Update,
        args: &[
            KEY,
            arg(c"window", ArgType::String),
            opt(c"n", ArgType::Integer, c"ADD"),
            opt(c"limit", ArgType::Integer, c"LIMIT"),
            AT,
        ],
        shared_options: false,
        acl: c"write",
    },
    CommandDoc {
        name: c"rl.info",
        arity: 2,
        summary: c"Describe a limiter key: algorithm, parameters, current state and TTL",
        complexity: c"O(1); O(log N) on a concurrency key, where N is the number of leases held",
        keys: Keys::Read,
        args: &[KEY],
        shared_options: false,
        acl: c"read fast",
    },
    CommandDoc {
        name: c"rl.refund",
        arity: -3,
        summary: c"Give units back to a limiter (a request that was charged but did not happen, or cost less than reserved)",
        complexity: c"O(1), O(N) for RL.SLIDING when the newest entry holds fewer than the units given back",
        keys: Keys::Update,
        args: &[
            KEY,
            arg(c"units", ArgType::Integer),
            opt(c"id", ArgType::String, c"DEDUP"),
            AT,
        ],
        shared_options: false,
        acl: c"write",
    },
    CommandDoc {
        name: c"rl.block",
        arity: -3,
        summary: c"Block a limiter key for a duration: every call on it is denied until the block ends",
        complexity: c"O(1)",
        keys: Keys::Update,
        args: &[
            KEY,
            arg(c"duration", ArgType::String),
            AT,
        ],
        shared_options: false,
        acl: c"write fast",
    },
    CommandDoc {
        name: c"rl.unblock",
        arity: 2,
        summary: c"Remove a limiter key's block",
        complexity: c"O(1)",
        keys: Keys::Update,
        args: &[KEY],
        shared_options: false,
        acl: c"write fast",
    },
    CommandDoc {
        name: c"rl.check",
        arity: -3,
        summary: c"The reply a limiter call with PEEK would give, read-only (runs on replicas)",
        complexity: c"O(1), O(log N) for RL.SLIDING",
        keys: Keys::Read,
        args: &[
            KEY,
            ArgDoc {
                multiple: true,
                ..arg(c"limiter", ArgType::String)
            },
            opt(c"cost", ArgType::Integer, c"COST"),
            opt(c"besteffort", ArgType::PureToken, c"BESTEFFORT"),
            AT,
        ],
        shared_options: false,
        acl: c"read fast",
    },
    CommandDoc {
        name: c"rl._restore",
        arity: -3,
        summary: c"Internal: recreate a limiter from its encoded state (AOF rewrite)",
        complexity: c"O(N) where N is the size of the payload",
        keys: Keys::Overwrite,
        args: &[
            KEY,
            arg(c"payload", ArgType::String),
            opt(c"unix-time-milliseconds", ArgType::UnixTime, c"PXAT"),
        ],
        shared_options: false,
        // Raw state: for replication and the AOF, never for applications (SPEC "ACL").
        acl: c"admin dangerous",
    },
    CommandDoc {
        name: c"rl._set",
        arity: 3,
        summary: c"Internal: store a limiter's encoded state, expiring when the state says (how a granted call replicates)",
        complexity: c"O(N) where N is the size of the payload",
        keys: Keys::Overwrite,
        args: &[KEY, arg(c"payload", ArgType::String)],
        shared_options: false,
        // As RL._RESTORE.
        acl: c"admin dangerous",
    },
];
