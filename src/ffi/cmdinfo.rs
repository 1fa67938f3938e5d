//! Hands `crate::docs` to the server with `RedisModule_SetCommandInfo`, which gives Redis 7.0+
//! exact arity, key specs (so cluster routing and `COMMAND GETKEYS` work) and `COMMAND DOCS`.
//!
//! `ffi::command::create` registers the commands with the legacy call (the `#[command]` macro
//! needs a 7.2 API); this adds what that call cannot say, ACL categories included: each
//! command's categories of `commands::table`, plus the module's own category, on the servers
//! that have these APIs (looked up at load, so Redis 7.0 still loads the module without them).

use std::ffi::CStr;
use std::mem::size_of;
use std::os::raw::c_int;

use redis_module::commands::{BeginSearch, FindKeys, KeySpec, KeySpecFlags, get_redis_key_spec};
use redis_module::{Context, raw};

use crate::docs::{ACL_CATEGORY, ArgDoc, ArgType, CommandDoc, Keys, SHARED_OPTIONS, SINCE};

fn arg_type(kind: ArgType) -> raw::RedisModuleCommandArgType {
    match kind {
        ArgType::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        ArgType::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        ArgType::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        ArgType::UnixTime => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME,
        ArgType::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
    }
}

fn raw_arg(a: &ArgDoc) -> raw::RedisModuleCommandArg {
    // SAFETY: the struct is plain C data for which all-zero is the documented "unset" value.
    let mut r: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
    r.name = a.name.as_ptr();
    r.type_ = arg_type(a.kind);
    r.key_spec_index = if a.kind == ArgType::Key { 0 } else { -1 };
    r.token = a.token.map_or(std::ptr::null(), |t| t.as_ptr());
    let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
    if a.optional {
        flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
    }
    if a.multiple {
        flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
    }
    r.flags = flags as c_int;
    r
}

fn key_spec(keys: Keys) -> Option<KeySpec> {
    let flags = match keys {
        Keys::Update | Keys::Numkeys => KeySpecFlags::READ_WRITE | KeySpecFlags::UPDATE,
        Keys::Read | Keys::ReadNumkeys => KeySpecFlags::READ_ONLY | KeySpecFlags::ACCESS,
        Keys::Overwrite | Keys::OverwritePairs => KeySpecFlags::OVERWRITE,
        Keys::None => return None,
    };
    if matches!(keys, Keys::Numkeys | Keys::ReadNumkeys) {
        return Some(KeySpec::new(
            None,
            flags,
            BeginSearch::new_index(1),
            FindKeys::new_keys_num(0, 1, 1),
        ));
    }
    if keys == Keys::OverwritePairs {
        // From argument 1 to the last, every other argument.
        return Some(KeySpec::new(
            None,
            flags,
            BeginSearch::new_index(1),
            FindKeys::new_range(-1, 2, 0),
        ));
    }
    Some(KeySpec::new(
        None,
        flags,
        BeginSearch::new_index(1),
        FindKeys::new_range(0, 1, 0),
    ))
}

/// Apply `doc` and the key spec `keys` to registered command `name`.
///
/// # Errors
/// A message naming the command if the server refused.
pub fn set_command_info(
    ctx: &Context,
    name: &CStr,
    keys: Keys,
    doc: &CommandDoc,
) -> Result<(), String> {
    let fail = |what: &str| format!("{}: {what}", name.to_string_lossy());
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let get_command = unsafe { raw::RedisModule_GetCommand };
    // SAFETY: as above.
    let set_info = unsafe { raw::RedisModule_SetCommandInfo };
    let (Some(get_command), Some(set_info)) = (get_command, set_info) else {
        // Servers older than 7.0 have no command info; the commands still work.
        return Ok(());
    };
    // SAFETY: called from OnLoad with the module's context; the name is NUL-terminated.
    let cmd = unsafe { get_command(ctx.ctx, name.as_ptr()) };
    if cmd.is_null() {
        return Err(fail("not registered"));
    }
    let spec = key_spec(keys);
    let has_keys = spec.is_some();
    let mut specs = get_redis_key_spec(spec.into_iter().collect());
    let extra: &[ArgDoc] = if doc.shared_options {
        SHARED_OPTIONS
    } else {
        &[]
    };
    let mut args: Vec<raw::RedisModuleCommandArg> =
        doc.args.iter().chain(extra).map(raw_arg).collect();
    // SAFETY: as in `raw_arg`: the zeroed entry terminates the array.
    args.push(unsafe { std::mem::zeroed() });
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
    };
    // SAFETY: plain C data; all-zero means "not given" for every field.
    let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
    info.version = &version;
    info.summary = doc.summary.as_ptr();
    info.complexity = doc.complexity.as_ptr();
    info.since = SINCE.as_ptr();
    info.arity = doc.arity;
    info.key_specs = if has_keys {
        specs.as_mut_ptr()
    } else {
        std::ptr::null_mut()
    };
    info.args = args.as_mut_ptr();
    // SAFETY: `cmd` is our registered command; every pointer in `info` is alive for the call
    // (Redis copies what it keeps).
    let rc = unsafe { set_info(cmd, &info) };
    if rc == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(fail("SetCommandInfo refused the command info"))
    }
}

/// Adds the module's ACL category ([`ACL_CATEGORY`]) where the server has module categories
/// (`RedisModule_AddACLCategory`, Redis 7.4+ and Valkey 8+). Only valid during `OnLoad`.
///
/// Returns whether the category exists now.
///
/// # Errors
/// A message if the server has the API and refused the category.
pub fn add_module_acl_category(ctx: &Context) -> Result<bool, String> {
    // SAFETY: copying a function pointer out of the API table, filled in at load (None when the
    // server lacks the API).
    let Some(add) = (unsafe { raw::RedisModule_AddACLCategory }) else {
        return Ok(false);
    };
    // SAFETY: called from OnLoad with the module's context; the name is NUL-terminated.
    let rc = unsafe { add(ctx.ctx, ACL_CATEGORY.as_ptr()) };
    if rc == raw::REDISMODULE_OK as c_int {
        Ok(true)
    } else {
        Err(format!(
            "the server refused the ACL category '{}'",
            ACL_CATEGORY.to_string_lossy()
        ))
    }
}

/// Puts registered command `name` in the ACL categories `acl` (space-separated), plus the
/// module's category when `module_category`, where the server has
/// `RedisModule_SetCommandACLCategories` (Redis 7.2+, Valkey). On older servers module commands
/// are in no category: users need `+@all` or the commands by name.
///
/// # Errors
/// A message naming the command if the server refused.
pub fn set_acl_categories(
    ctx: &Context,
    name: &CStr,
    acl: &CStr,
    module_category: bool,
) -> Result<(), String> {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let get_command = unsafe { raw::RedisModule_GetCommand };
    // SAFETY: as above (None on servers without the API).
    let set_acl = unsafe { raw::RedisModule_SetCommandACLCategories };
    let (Some(get_command), Some(set_acl)) = (get_command, set_acl) else {
        return Ok(());
    };
    let mut categories = acl.to_bytes().to_vec();
    if module_category {
        categories.push(b' ');
        categories.extend_from_slice(ACL_CATEGORY.to_bytes());
    }
    categories.push(0);
    // SAFETY: called from OnLoad with the module's context; the name is NUL-terminated.
    let cmd = unsafe { get_command(ctx.ctx, name.as_ptr()) };
    if cmd.is_null() {
        return Err(format!("{}: not registered", name.to_string_lossy()));
    }
    // SAFETY: `cmd` is our registered command; `categories` ends with the NUL pushed above and
    // has no other NUL (both parts are C strings).
    let rc = unsafe { set_acl(cmd, categories.as_ptr().cast()) };
    if rc == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(format!(
            "{}: the server refused the ACL categories '{}'",
            name.to_string_lossy(),
            String::from_utf8_lossy(&categories[..categories.len() - 1])
        ))
    }
}
