//! One row of the command table (`commands::table`): a command's name, handler, flags, key
//! spec, ACL categories, docs and counters, and the handler's side of it ([`Run`]).

use std::ffi::CStr;

use redis_module::Context;

use crate::docs::{CommandDoc, Keys};
use crate::error::RlError;
use crate::ffi::command::{Argv, Callback};
use crate::stats::CommandStats;

/// One command.
#[derive(Debug)]
pub struct Command {
    /// The registered name, lower case.
    pub name: &'static CStr,
    /// What Redis calls: the row's [`Run`] type, given this row.
    pub handler: Callback,
    /// Redis command flags (`write deny-oom fast`).
    pub flags: &'static CStr,
    /// How the command uses its key(s): the key spec of `COMMAND INFO`, and the legacy key range.
    pub keys: Keys,
    /// Redis ACL categories (`write fast`), so users granted those categories can run the
    /// command. The module's own category is added where the server has module categories,
    /// except to administration commands ([`Command::in_module_category`]).
    pub acl: &'static CStr,
    /// What `COMMAND DOCS` says of it.
    pub doc: &'static CommandDoc,
    /// Its `INFO ratelimit` counters (named, or `None`: not shown).
    pub stats: CommandStats,
}

/// The ACL category of administration commands: a command in it is in no category that lets
/// applications rate-limit, the module's own included.
pub const ADMIN: &[u8] = b"admin";

impl Command {
    /// The name as text (for error messages).
    pub fn name_str(&self) -> &'static str {
        self.name.to_str().unwrap_or_default()
    }

    /// Whether the command is in the module's ACL category: every command applications use
    /// is, administration commands (in `@admin`, such as the internal RL._SET and RL._RESTORE,
    /// which write raw state) are not.
    pub fn in_module_category(&self) -> bool {
        !self
            .acl
            .to_bytes()
            .split(|&b| b == b' ')
            .any(|c| c == ADMIN)
    }

    /// Whether it is a subcommand (`container|sub`, as RL.POLICY's).
    pub fn is_subcommand(&self) -> bool {
        self.name.to_bytes().contains(&b'|')
    }

    /// The legacy key range (first, last, step): the key at argument 1, or none for a command
    /// that finds its keys itself (`getkeys-api`) or has none.
    pub fn key_range(&self) -> (i32, i32, i32) {
        match self.keys {
            Keys::Numkeys | Keys::ReadNumkeys | Keys::None => (0, 0, 0),
            Keys::Update | Keys::Read | Keys::Overwrite => (1, 1, 1),
            Keys::OverwritePairs => (1, -1, 2),
        }
    }
}

/// A command's handler: runs the call on its arguments (`argv[0]` is the command name) and
/// their bytes (`bytes[i]` is `argv[i]`'s), with its row of the table. On `Ok` it has replied;
/// an error is replied for it (`ffi::command`).
pub trait Run {
    /// Run the call.
    ///
    /// # Errors
    /// The error to reply (nothing was replied yet).
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError>;
}
