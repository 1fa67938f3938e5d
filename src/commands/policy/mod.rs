//! RL.POLICY SET/GET/DEL/LIST/DUMP/RESTORE: named policies, module state outside the keyspace
//! (`core::policy`), applied by RL.LIMIT (`commands::policy::limit`) and by `POLICY name` in RL.ALL and
//! RL.CHECKALL.
//!
//! Each subcommand is a subcommand of the container `rl.policy` (`rl.policy|set`), with its own
//! flags and ACL categories: SET, DEL, DUMP and RESTORE are `@admin`, GET and LIST `@read` and in
//! the module's category.
//!
//! Replicas and the AOF get the policy as it is, version included: a SET propagates as
//! `RL.POLICY RESTORE <that policy> MERGE` (replayed from a master or the AOF, a MERGE keeps the
//! payload's versions; from a client it gives the next ones), a RESTORE as
//! `RL.POLICY RESTORE <every policy>`, a DEL as itself. The RDB holds them as aux data (`ffi::datatype`), and an AOF rewrite, whose
//! base file has no place for them without an RDB preamble, gets them at the start of its new
//! incremental file (`commands::policy::state`).

pub mod limit;
pub mod state;

use std::sync::Arc;

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, RedisValue};

use crate::commands::call::args::{Args, quote};
use crate::commands::limiters::registry::parse_limiter;
use crate::commands::policy::state::{dump_all, flush_pending, owe_nothing, store};
use crate::commands::row::{Command, Run};
use crate::config;
use crate::core::policy::{
    self, ARG_MAX, ARGS_MAX, DESC_MAX, Definition, LIMITERS_MAX, Payload, Policy, PolicyLimiter,
    RESTORE_MAX, StoreError,
};
use crate::docs::{ArgDoc, ArgType, CommandDoc, arg, opt};
use crate::error::RlError;
use crate::ffi;
use crate::ffi::command::Argv;
use crate::ffi::reply;

/// The error for a policy name that is not `[a-z0-9_]{1,64}`.
const BAD_NAME: RlError =
    RlError::Conflict("policy name must be 1 to 64 characters of a-z, 0-9 and '_'");

/// A policy name, checked.
///
/// # Errors
/// [`BAD_NAME`].
fn name_of(token: &[u8]) -> Result<&[u8], RlError> {
    if policy::valid_name(token) {
        Ok(token)
    } else {
        Err(BAD_NAME)
    }
}

/// Parse a policy's definition, the arguments of `RL.POLICY SET name` after the name:
/// `limiter [limiter ...] [SHADOW] [DESC text]`, each limiter as in RL.ALL (with `CHARGE` and
/// `NAME`), at most [`LIMITERS_MAX`] limiters, [`ARGS_MAX`] arguments of at most [`ARG_MAX`]
/// bytes, a `DESC` of at most [`DESC_MAX`] bytes.
///
/// # Errors
/// Every limiter's own argument errors, and the bounds above.
pub fn parse_definition(items: &[&[u8]]) -> Result<Definition, RlError> {
    if items.is_empty() {
        return Err(RlError::Syntax("a policy needs at least one limiter"));
    }
    if items.len() > ARGS_MAX || items.iter().any(|a| a.len() > ARG_MAX) {
        return Err(RlError::Conflict(
            "a policy's definition must be at most 256 arguments of at most 1024 bytes",
        ));
    }
    let mut args = Args::new(items);
    let mut limiters: Vec<PolicyLimiter> = Vec::new();
    let mut shadow = false;
    let mut desc: Option<Vec<u8>> = None;
    while let Some(token) = args.peek() {
        if token.eq_ignore_ascii_case(b"SHADOW") {
            args.next();
            crate::commands::call::args::once(&mut shadow, "SHADOW")?;
            continue;
        }
        if token.eq_ignore_ascii_case(b"DESC") {
            args.next();
            if desc.is_some() {
                return Err(RlError::Duplicate("DESC"));
            }
            let text = args.value_of("DESC")?;
            if text.len() > DESC_MAX {
                return Err(RlError::Conflict("DESC must be at most 1024 bytes"));
            }
            desc = Some(text.to_vec());
            continue;
        }
        if shadow || desc.is_some() {
            return Err(RlError::Syntax("limiters come before SHADOW and DESC"));
        }
        if limiters.len() >= LIMITERS_MAX {
            return Err(RlError::Conflict("a policy has at most 16 limiters"));
        }
        let l = parse_limiter(&mut args)?;
        limiters.push(PolicyLimiter {
            params: l.params,
            charge: l.charge,
            name: l.name.map(<[u8]>::to_vec),
        });
    }
    if limiters.is_empty() {
        return Err(RlError::Syntax("a policy needs at least one limiter"));
    }
    Ok(Definition {
        limiters,
        shadow,
        desc,
    })
}

/// Where a payload comes from: a client's `RESTORE`, whose counter must leave versions to give
/// (at most [`RESTORE_MAX`]), or the server's own state (an RDB, a master, the AOF), read
/// whatever its versions, as every form an earlier version of the module wrote must load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Client,
    Saved,
}

/// A version as a reply, never capped: at most [`policy::VERSION_MAX`] unless an earlier version of the
/// module saved more.
///
/// # Errors
/// A version above `i64::MAX`, which no RESP integer holds.
fn version_reply(v: u64) -> Result<i64, RlError> {
    i64::try_from(v).map_err(|_| {
        RlError::Conflict("a policy version is above 2^63-1, more than a reply can hold")
    })
}

/// A payload's policies, every definition parsed: the whole payload judged before anything
/// changes.
///
/// # Errors
/// `ERR invalid policy payload`, naming the first policy whose definition does not parse, or a
/// client's version counter above [`RESTORE_MAX`].
fn parse_payload(bytes: &[u8], max: usize, source: Source) -> Result<(u64, Vec<Policy>), RlError> {
    let Payload { counter, records } = policy::decode(bytes, max).ok_or(RlError::PolicyPayload)?;
    // `decode` refused any version above the counter.
    if source == Source::Client && counter > RESTORE_MAX {
        return Err(RlError::PolicyVersions);
    }
    for (i, a) in records.iter().enumerate() {
        if let Some(b) = records
            .iter()
            .skip(i.saturating_add(1))
            .find(|b| policy::fields_collide(&a.name, &b.name))
        {
            return Err(RlError::PolicyFields(quote(&a.name), quote(&b.name)));
        }
    }
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        let refs: Vec<&[u8]> = r.args.iter().map(Vec::as_slice).collect();
        let def = parse_definition(&refs)
            .map_err(|e| RlError::BadPolicy(quote(&r.name), e.to_string()))?;
        out.push(Policy {
            name: r.name,
            version: r.version,
            args: r.args,
            def,
            stats: Arc::default(),
        });
    }
    Ok((counter, out))
}

/// Replace every policy with those of `payload` (an RDB's aux data), or say why not, changing
/// nothing: it does not decode or a definition does not parse. No bound on their number nor on
/// their versions: the data was accepted when it was written.
///
/// # Errors
/// The error RL.POLICY RESTORE would reply, as text.
pub fn load_all(payload: &[u8]) -> Result<(), String> {
    let (counter, policies) = parse_payload(payload, policy::MAX_POLICIES_LIMIT, Source::Saved)
        .map_err(|e| e.to_string())?;
    store().replace_all(counter, policies);
    Ok(())
}

/// The container `RL.POLICY` (its subcommands have their own docs).
pub const CONTAINER_DOC: CommandDoc = CommandDoc {
    arity: -2,
    summary: c"Named policies, limits stored in the server: SET, GET, DEL, LIST, DUMP, RESTORE",
    complexity: c"O(1) to O(N), depending on the subcommand",
    args: &[],
    shared_options: false,
};

/// The container's name.
pub const CONTAINER: &std::ffi::CStr = c"rl.policy";

/// `RL.POLICY SET name limiter [limiter ...] [SHADOW] [DESC text]`
pub const SET_DOC: CommandDoc = CommandDoc {
    arity: -4,
    summary: c"Create or replace a named policy: one or more limiters written as in RL.ALL",
    complexity: c"O(N) where N is the number of the policy's arguments",
    args: &[
        arg(c"name", ArgType::String),
        ArgDoc {
            multiple: true,
            ..arg(c"limiter", ArgType::String)
        },
        opt(c"shadow", ArgType::PureToken, c"SHADOW"),
        opt(c"text", ArgType::String, c"DESC"),
    ],
    shared_options: false,
};

/// `RL.POLICY GET name`
pub const GET_DOC: CommandDoc = CommandDoc {
    arity: 3,
    summary: c"The arguments of the RL.POLICY SET that made a policy (after its name), or nil",
    complexity: c"O(N) where N is the number of the policy's arguments",
    args: &[arg(c"name", ArgType::String)],
    shared_options: false,
};

/// `RL.POLICY DEL name`
pub const DEL_DOC: CommandDoc = CommandDoc {
    arity: 3,
    summary: c"Delete a named policy: later calls under it fail with an error naming it",
    complexity: c"O(log N) where N is the number of policies",
    args: &[arg(c"name", ArgType::String)],
    shared_options: false,
};

/// `RL.POLICY LIST`
pub const LIST_DOC: CommandDoc = CommandDoc {
    arity: 2,
    summary: c"Every policy's name and version (a number that grows with each change)",
    complexity: c"O(N) where N is the number of policies",
    args: &[],
    shared_options: false,
};

/// `RL.POLICY DUMP`
pub const DUMP_DOC: CommandDoc = CommandDoc {
    arity: 2,
    summary: c"Every policy, with its version, as one payload for RL.POLICY RESTORE",
    complexity: c"O(N) where N is the size of the policies",
    args: &[],
    shared_options: false,
};

/// `RL.POLICY RESTORE payload [MERGE]`
pub const RESTORE_DOC: CommandDoc = CommandDoc {
    arity: -3,
    summary: c"Replace every policy with those of a DUMP payload, versions included (MERGE: add or replace only the payload's, as new versions)",
    complexity: c"O(N) where N is the size of the payload",
    args: &[
        arg(c"payload", ArgType::String),
        opt(c"merge", ArgType::PureToken, c"MERGE"),
    ],
    shared_options: false,
};

/// `RL.POLICY HELP`
pub const HELP_DOC: CommandDoc = CommandDoc {
    arity: 2,
    summary: c"Show helpful text about the different subcommands",
    complexity: c"O(1)",
    args: &[],
    shared_options: false,
};

/// RL.POLICY HELP's lines.
const HELP: &[&str] = &[
    "RL.POLICY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "SET <name> <limiter> [<limiter> ...] [SHADOW] [DESC <text>]",
    "    Create or replace a policy: limiters written as in RL.ALL. Replies its version.",
    "GET <name>",
    "    The arguments of the SET that made it, or nil.",
    "DEL <name>",
    "    Delete it: later calls under it are an error naming it.",
    "LIST",
    "    Every policy's name and version.",
    "DUMP",
    "    Every policy, versions included, as one payload.",
    "RESTORE <payload> [MERGE]",
    "    Replace every policy with the payload's, versions included (MERGE: add or replace",
    "    only those, each taking the next version).",
    "HELP",
    "    Print this help.",
];

/// RL.POLICY HELP
pub struct Help;

impl Run for Help {
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        if argv.len() != 2 {
            return Err(RlError::Arity);
        }
        ctx.reply(Ok(RedisValue::Array(
            HELP.iter()
                .map(|l| RedisValue::SimpleStringStatic(l))
                .collect(),
        )));
        Ok(())
    }
}

/// The store's error as the client sees it.
fn store_error(e: StoreError) -> RlError {
    match e {
        StoreError::Full(_) => RlError::Conflict(
            "too many policies: ratelimit.max-policies reached (delete one or raise it)",
        ),
        StoreError::Exhausted => {
            RlError::Conflict("no policy version left: versions stop at 9007199254740991 (2^53-1)")
        }
    }
}

/// RL.POLICY SET
pub struct Set;

impl Run for Set {
    fn run(
        ctx: &Context,
        _argv: Argv<'_>,
        bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        let [_, _, name, def @ ..] = bytes else {
            return Err(RlError::Arity);
        };
        if def.is_empty() {
            return Err(RlError::Arity);
        }
        let name = name_of(name)?;
        let parsed = parse_definition(def)?;
        let args: Vec<Vec<u8>> = def.iter().map(|a| a.to_vec()).collect();
        let (version, payload) = {
            let mut s = store();
            if let Some(other) = s.collision(name) {
                return Err(RlError::PolicyFields(quote(name), quote(other)));
            }
            let version = s
                .set(name, args, parsed, config::max_policies())
                .map_err(store_error)?;
            let payload = s.get(name).map(|p| s.dump_one(p)).unwrap_or_default();
            (version, payload)
        };
        flush_pending(ctx);
        ffi::replicate::replicate_policies(ctx, &payload, true);
        reply::integer(ctx, version_reply(version)?);
        Ok(())
    }
}

/// RL.POLICY GET
pub struct Get;

impl Run for Get {
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        if argv.len() != 3 {
            return Err(RlError::Arity);
        }
        let name = argv.get(2).ok_or(RlError::Arity)?.bytes();
        let found = store().get(name).cloned();
        match found {
            Some(p) => ctx.reply(Ok(RedisValue::Array(
                p.args
                    .iter()
                    .map(|a| RedisValue::StringBuffer(a.clone()))
                    .collect(),
            ))),
            None => ctx.reply(Ok(RedisValue::Null)),
        };
        Ok(())
    }
}

/// RL.POLICY DEL
pub struct Del;

impl Run for Del {
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        if argv.len() != 3 {
            return Err(RlError::Arity);
        }
        let name = argv.get(2).ok_or(RlError::Arity)?.bytes();
        let removed = store().del(name);
        if removed {
            flush_pending(ctx);
            ffi::replicate::replicate(ctx, c"rl.policy", argv);
        }
        reply::integer(ctx, i64::from(removed));
        Ok(())
    }
}

/// RL.POLICY LIST
pub struct List;

impl Run for List {
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        if argv.len() != 2 {
            return Err(RlError::Arity);
        }
        let pairs = store()
            .iter()
            .map(|p| Ok((p.name.clone(), version_reply(p.version)?)))
            .collect::<Result<Vec<(Vec<u8>, i64)>, RlError>>()?;
        if reply::is_resp3(ctx) {
            ctx.reply(Ok(RedisValue::OrderedMap(
                pairs
                    .into_iter()
                    .map(|(n, v)| (RedisValueKey::BulkString(n), RedisValue::Integer(v)))
                    .collect(),
            )));
        } else {
            ctx.reply(Ok(RedisValue::Array(
                pairs
                    .into_iter()
                    .flat_map(|(n, v)| [RedisValue::StringBuffer(n), RedisValue::Integer(v)])
                    .collect(),
            )));
        }
        Ok(())
    }
}

/// RL.POLICY DUMP
pub struct Dump;

impl Run for Dump {
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        if argv.len() != 2 {
            return Err(RlError::Arity);
        }
        reply::bulk(ctx, &dump_all());
        Ok(())
    }
}

/// RL.POLICY RESTORE payload \[MERGE\]: the payload judged whole (it decodes, every definition
/// parses, the result fits `ratelimit.max-policies`, versions are left to give) before anything
/// changes. Without MERGE the server ends with exactly the payload's policies and versions
/// (what copying to every shard needs: equal `policies_checksum`), its counter the larger of
/// the two; with MERGE the payload's policies are added or replace those of the same names, the
/// others are kept, and each policy added or changed takes the next version of this server (so
/// versions keep growing and stay unique; a policy equal to the stored one keeps its version).
/// Replicated from a master or replayed from the AOF, it is the master's state: not bounded by
/// `ratelimit.max-policies` nor [`RESTORE_MAX`], and a MERGE keeps the payload's versions (how a
/// SET propagates). Versions a server gives stop at [`policy::VERSION_MAX`].
pub struct Restore;

impl Run for Restore {
    fn run(
        ctx: &Context,
        _argv: Argv<'_>,
        bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        let (payload, merge) = match bytes {
            [_, _, payload] => (*payload, false),
            [_, _, payload, m] if m.eq_ignore_ascii_case(b"MERGE") => (*payload, true),
            [_, _, _, other] => return Err(RlError::UnknownOption(quote(other))),
            _ => return Err(RlError::Arity),
        };
        let replaying = ffi::wait::replaying(ctx);
        let (max, source) = if replaying {
            (policy::MAX_POLICIES_LIMIT, Source::Saved)
        } else {
            (config::max_policies(), Source::Client)
        };
        let (counter, policies) = parse_payload(payload, max, source)?;
        let full = {
            let mut s = store();
            if merge {
                if let Some((p, other)) = policies
                    .iter()
                    .find_map(|p| s.collision(&p.name).map(|o| (p, o)))
                {
                    return Err(RlError::PolicyFields(quote(&p.name), quote(other)));
                }
                if replaying {
                    for p in policies {
                        s.put(p);
                    }
                    s.raise_counter(counter);
                } else {
                    s.merge(policies, max).map_err(store_error)?;
                }
            } else {
                let counter = counter.max(s.counter());
                s.replace_all(counter, policies);
            }
            s.dump()
        };
        owe_nothing();
        ffi::replicate::replicate_policies(ctx, &full, false);
        reply::ok(ctx);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fixed_window::{Fixed, FixedParams};
    use crate::core::gcra::{Gcra, GcraParams};
    use crate::core::multi::AnyParams;
    use crate::core::policy::{PolicyStore, VERSION_MAX};

    fn def(s: &str) -> Result<Definition, String> {
        let items: Vec<&[u8]> = s.split(' ').map(str::as_bytes).collect();
        parse_definition(&items).map_err(|e| e.to_string())
    }

    #[test]
    fn a_definition_is_limiters_as_in_rl_all_then_shadow_and_desc() {
        let d = def("GCRA 10 5 1s NAME rps FIXED 100 1m CHARGE 2 SHADOW DESC free_tier").unwrap();
        assert_eq!(
            d.limiters,
            [
                PolicyLimiter {
                    params: AnyParams::of::<Gcra>(&GcraParams::new(10, 5, 1_000_000).unwrap()),
                    charge: None,
                    name: Some(b"rps".to_vec()),
                },
                PolicyLimiter {
                    params: AnyParams::of::<Fixed>(&FixedParams::new(100, 60_000_000, 0).unwrap()),
                    charge: Some(2),
                    name: None,
                },
            ]
        );
        assert!(d.shadow);
        assert_eq!(d.desc.as_deref(), Some(&b"free_tier"[..]));
        assert!(!def("gcra 1 1 1s").unwrap().shadow);
    }

    #[test]
    fn bad_definitions_are_refused_with_the_limiters_own_errors() {
        #[rustfmt::skip]
        let cases: &[(&str, &str)] = &[
            ("SHADOW",                         "ERR syntax error, a policy needs at least one limiter"),
            ("GCRA 0 1 1s",                    "ERR burst must be a positive integer"),
            ("GCRA 1 1",                       "ERR syntax error, GCRA needs its positional arguments"),
            ("NOPE 1",                         "ERR unknown limiter 'NOPE'"),
            ("GCRA 1 1 1s SHADOW GCRA 1 1 1s", "ERR syntax error, limiters come before SHADOW and DESC"),
            ("GCRA 1 1 1s SHADOW SHADOW",      "ERR syntax error, SHADOW given more than once"),
            ("GCRA 1 1 1s DESC",               "ERR syntax error, DESC needs a value"),
            ("GCRA 1 1 1s DESC a DESC b",      "ERR syntax error, DESC given more than once"),
            ("GCRA 1 1 1s COST 2",             "ERR unknown limiter 'COST'"),
        ];
        for (items, want) in cases {
            assert_eq!(def(items).unwrap_err(), *want, "{items}");
        }
        let many = "GCRA 1 1 1s ".repeat(17);
        assert_eq!(
            def(many.trim_end()).unwrap_err(),
            "ERR a policy has at most 16 limiters"
        );
        let long = format!("GCRA 1 1 1s DESC {}", "x".repeat(1025));
        assert!(def(&long).unwrap_err().contains("at most"));
    }

    #[test]
    fn names_outside_a_z_0_9_underscore_are_refused() {
        assert!(name_of(b"free_2").is_ok());
        for bad in [&b""[..], b"Free", b"a-b", b"\xff", &[b'a'; 65]] {
            assert_eq!(
                name_of(bad).unwrap_err().to_string(),
                "ERR policy name must be 1 to 64 characters of a-z, 0-9 and '_'"
            );
        }
    }

    #[test]
    fn a_payload_is_judged_whole() {
        let mut s = PolicyStore::new();
        let good = def("GCRA 1 1 1s").unwrap();
        s.set(
            b"a",
            vec![
                b"GCRA".to_vec(),
                b"1".to_vec(),
                b"1".to_vec(),
                b"1s".to_vec(),
            ],
            good.clone(),
            9,
        )
        .unwrap();
        s.set(
            b"b",
            vec![
                b"GCRA".to_vec(),
                b"0".to_vec(),
                b"1".to_vec(),
                b"1s".to_vec(),
            ],
            good,
            9,
        )
        .unwrap();
        // `b`'s arguments do not parse: the whole payload is refused, naming it.
        let e = parse_payload(&s.dump(), 9, Source::Client)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "ERR invalid policy payload: policy 'b': ERR burst must be a positive integer"
        );
        s.del(b"b");
        let (counter, policies) = parse_payload(&s.dump(), 9, Source::Client).unwrap();
        assert_eq!((counter, policies.len()), (2, 1));
        assert_eq!(
            parse_payload(b"RLP", 9, Source::Client)
                .unwrap_err()
                .to_string(),
            "ERR invalid policy payload"
        );
    }

    #[test]
    fn a_payload_above_the_version_bound_is_refused_naming_it() {
        let at = |counter: u64, version: u64| {
            let p = Policy {
                name: b"a".to_vec(),
                version,
                args: vec![
                    b"GCRA".to_vec(),
                    b"1".to_vec(),
                    b"1".to_vec(),
                    b"1s".to_vec(),
                ],
                def: def("GCRA 1 1 1s").unwrap(),
                stats: Arc::default(),
            };
            policy::encode(counter, std::iter::once(&p))
        };
        let client = |b: &[u8]| parse_payload(b, 9, Source::Client).map(|(c, _)| c);
        let saved = |b: &[u8]| parse_payload(b, 9, Source::Saved).map(|(c, _)| c);
        assert_eq!(client(&at(RESTORE_MAX, RESTORE_MAX)), Ok(RESTORE_MAX));
        for (counter, version) in [(RESTORE_MAX + 1, 1), (u64::MAX, u64::MAX)] {
            assert_eq!(
                client(&at(counter, version)).unwrap_err().to_string(),
                "ERR invalid policy payload: its version counter is above 4503599627370496 (2^52)"
            );
        }
        // The server's own state loads whatever an earlier version of the module saved; a
        // version no reply holds is an error, never a capped number.
        assert_eq!(saved(&at(RESTORE_MAX + 1, 1)), Ok(RESTORE_MAX + 1));
        assert_eq!(saved(&at(u64::MAX, u64::MAX)), Ok(u64::MAX));
        assert_eq!(version_reply(VERSION_MAX), Ok(VERSION_MAX as i64));
        assert_eq!(
            version_reply(1 << 63).unwrap_err().to_string(),
            "ERR a policy version is above 2^63-1, more than a reply can hold"
        );
    }
}
