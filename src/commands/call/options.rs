//! The option model, as data: which options each command parses ([`CommandOptions::takes`]),
//! and which options and pairs of options it then refuses, with the error it replies
//! ([`Rule`], in the order the command checks them). Pure: no server, no parsing.
//!
//! The parser takes a command's list from here (`Options::parse_only`), the combination checks
//! reply the texts defined here, COMMAND DOCS and the README are checked against it (the tests
//! below), and `tests/options_table.rs` holds a real server to it for every (command, option,
//! option) triple (it includes this file: nothing here may name the crate). The client
//! packages check their option lists against COMMAND DOCS and against this table, which they read
//! as `docs/options.json` ([`json`], held equal to it by a unit test).

/// An option's token, upper case.
pub type Token = &'static [u8];

/// The shared options' tokens.
pub const COST: Token = b"COST";
pub const PEEK: Token = b"PEEK";
pub const SHADOW: Token = b"SHADOW";
pub const BESTEFFORT: Token = b"BESTEFFORT";
pub const DEDUP: Token = b"DEDUP";
pub const BLOCK: Token = b"BLOCK";
pub const DELAY: Token = b"DELAY";
pub const HOLD: Token = b"HOLD";
pub const AT: Token = b"AT";
pub const DETAIL: Token = b"DETAIL";

/// The shared options, as typed (upper case): what `Options::parse` takes (`args::SHARED`).
pub const SHARED: &[Token] = &[
    COST, PEEK, SHADOW, BESTEFFORT, DEDUP, BLOCK, DELAY, HOLD, AT, DETAIL,
];

/// `WAIT timeout`: RL.ACQUIRE's own option, in the table for its combinations.
pub const WAIT: Token = b"WAIT";

/// Every option the table speaks of: the shared ones, then `WAIT`.
pub const UNIVERSE: &[Token] = &[
    COST, PEEK, SHADOW, BESTEFFORT, DEDUP, BLOCK, DELAY, HOLD, AT, DETAIL, WAIT,
];

/// The error of `HOLD` without `DEDUP`.
pub const HOLD_NEEDS_DEDUP: &str = "HOLD needs DEDUP id (the reservation is settled by its id)";

/// The error of `HOLD` on a concurrency limiter.
pub const HOLD_NO_CONCURRENCY: &str =
    "HOLD does not apply to a concurrency limiter, its units come back with RL.RELEASE";

/// The errors of `WAIT` with `PEEK`, `AT` and `BLOCK` (RL.ACQUIRE).
pub const WAIT_PEEK: &str = "WAIT cannot be combined with PEEK";
pub const WAIT_AT: &str = "WAIT cannot be combined with AT";
pub const WAIT_BLOCK: &str = "WAIT cannot be combined with BLOCK";

/// The error of `DELAY` on an algorithm that does not take it (`RlError::NoDelay`), by the
/// algorithm's name.
pub const NO_DELAY_FIXED: &str =
    "DELAY does not apply to FIXED, only to GCRA, TOKENBUCKET and LEAKYBUCKET";
pub const NO_DELAY_SLIDING: &str =
    "DELAY does not apply to SLIDING, only to GCRA, TOKENBUCKET and LEAKYBUCKET";
pub const NO_DELAY_SLIDINGCOUNTER: &str =
    "DELAY does not apply to SLIDINGCOUNTER, only to GCRA, TOKENBUCKET and LEAKYBUCKET";
pub const NO_DELAY_CONCURRENCY: &str =
    "DELAY does not apply to CONCURRENCY, only to GCRA, TOKENBUCKET and LEAKYBUCKET";

/// RL.ACQUIRE's refusal of the shared options it parses but does not take.
pub const UNKNOWN_BESTEFFORT: &str = "unknown option 'BESTEFFORT'";
pub const UNKNOWN_DEDUP: &str = "unknown option 'DEDUP'";

/// A refusal among the options a command parsed. The error is the reply's text after `ERR `.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The option is refused whatever comes with it.
    Alone(Token, &'static str),
    /// The two options are refused together (in either order).
    Pair(Token, Token, &'static str),
    /// The first option is refused without the second.
    Needs(Token, Token, &'static str),
}

/// One command's options.
#[derive(Debug, Clone, Copy)]
pub struct CommandOptions {
    /// The command's name, as typed (upper case).
    pub command: &'static str,
    /// The options of [`UNIVERSE`] its parser takes; any other is `ERR unknown option '<it>'`,
    /// and any of them given twice `ERR syntax error, <it> given more than once`.
    pub takes: &'static [Token],
    /// What it then refuses, in the order it checks (the first that applies is the reply).
    pub rules: &'static [Rule],
}

/// The rules of a command whose limiters take `DELAY` and `HOLD`.
const NO_DELAY_OR_HOLD: &[Rule] = &[Rule::Needs(HOLD, DEDUP, HOLD_NEEDS_DEDUP)];

/// `takes` of RL.CHECK.
pub const CHECK: &[Token] = &[COST, BESTEFFORT, SHADOW, DETAIL, AT];
/// `takes` of RL.CHECKALL.
pub const CHECKALL: &[Token] = &[COST, SHADOW, DETAIL, AT];
/// `takes` of RL.REFUND.
pub const REFUND: &[Token] = &[DEDUP, AT];
/// `takes` of RL.SETTLE and RL.BLOCK.
pub const AT_ONLY: &[Token] = &[AT];

/// RL.ACQUIRE's rules, in the order it checks them: `HOLD` as it parses
/// (`acquire::args::parse_with`), then `BESTEFFORT`, `DEDUP` and `WAIT`'s pairs
/// (`acquire::args::parse_acquire`, with these texts), then `DELAY` (`wait::acquire`, after
/// `WAIT`'s own bound). The checks stay written out there: evaluating these rules on each call
/// cost RL.ACQUIRE about 300 instructions (2%).
const ACQUIRE_RULES: &[Rule] = &[
    Rule::Alone(HOLD, HOLD_NO_CONCURRENCY),
    Rule::Alone(BESTEFFORT, UNKNOWN_BESTEFFORT),
    Rule::Alone(DEDUP, UNKNOWN_DEDUP),
    Rule::Pair(WAIT, PEEK, WAIT_PEEK),
    Rule::Pair(WAIT, AT, WAIT_AT),
    Rule::Pair(WAIT, BLOCK, WAIT_BLOCK),
    Rule::Alone(DELAY, NO_DELAY_CONCURRENCY),
];

/// A window algorithm's rules: `DELAY` refused (`Options::check_delay`), then `HOLD` without
/// `DEDUP` (`Options::check_hold`).
const fn window(no_delay: &'static str) -> [Rule; 2] {
    [
        Rule::Alone(DELAY, no_delay),
        Rule::Needs(HOLD, DEDUP, HOLD_NEEDS_DEDUP),
    ]
}
const FIXED_RULES: &[Rule] = &window(NO_DELAY_FIXED);
const SLIDING_RULES: &[Rule] = &window(NO_DELAY_SLIDING);
const SLIDINGCOUNTER_RULES: &[Rule] = &window(NO_DELAY_SLIDINGCOUNTER);

/// Every command that takes shared options (CL.THROTTLE and RL.STREAMCOUNT take their own),
/// with the limiters of RL.ALL and RL.LIMIT's policy schedules (GCRA).
pub const TABLE: &[CommandOptions] = &[
    CommandOptions {
        command: "RL.GCRA",
        takes: SHARED,
        rules: NO_DELAY_OR_HOLD,
    },
    CommandOptions {
        command: "RL.TOKENBUCKET",
        takes: SHARED,
        rules: NO_DELAY_OR_HOLD,
    },
    CommandOptions {
        command: "RL.LEAKYBUCKET",
        takes: SHARED,
        rules: NO_DELAY_OR_HOLD,
    },
    CommandOptions {
        command: "RL.FIXED",
        takes: SHARED,
        rules: FIXED_RULES,
    },
    CommandOptions {
        command: "RL.SLIDING",
        takes: SHARED,
        rules: SLIDING_RULES,
    },
    CommandOptions {
        command: "RL.SLIDINGCOUNTER",
        takes: SHARED,
        rules: SLIDINGCOUNTER_RULES,
    },
    CommandOptions {
        command: "RL.ALL",
        takes: SHARED,
        rules: NO_DELAY_OR_HOLD,
    },
    CommandOptions {
        command: "RL.LIMIT",
        takes: SHARED,
        rules: NO_DELAY_OR_HOLD,
    },
    CommandOptions {
        command: "RL.ACQUIRE",
        takes: UNIVERSE,
        rules: ACQUIRE_RULES,
    },
    CommandOptions {
        command: "RL.CHECK",
        takes: CHECK,
        rules: &[],
    },
    CommandOptions {
        command: "RL.CHECKALL",
        takes: CHECKALL,
        rules: &[],
    },
    CommandOptions {
        command: "RL.REFUND",
        takes: REFUND,
        rules: &[],
    },
    CommandOptions {
        command: "RL.SETTLE",
        takes: AT_ONLY,
        rules: &[],
    },
    CommandOptions {
        command: "RL.BLOCK",
        takes: AT_ONLY,
        rules: &[],
    },
];

/// The error of `BESTEFFORT` with a concurrency limiter (`core::concurrency`).
pub const BESTEFFORT_NO_CONCURRENCY: &str = "BESTEFFORT does not apply to CONCURRENCY";
/// The error of a concurrency limiter in RL.ALL without `DEDUP id` (`core::concurrency`).
pub const ALL_NEEDS_LEASE_ID: &str = "CONCURRENCY in RL.ALL needs DEDUP id (the lease id)";
/// The error of RL.LIMIT under a concurrency policy without `DEDUP id`.
pub const POLICY_NEEDS_LEASE_ID: &str = "a CONCURRENCY policy needs DEDUP id (the lease id)";
/// The error of `BESTEFFORT` when a limiter's `CHARGE` is not the `COST` (`core::multi`).
pub const BESTEFFORT_CHARGES: &str = "BESTEFFORT does not apply to a CHARGE other than COST";

/// A refusal that depends on a limiter of the call (RL.ALL's and RL.CHECK's limiters, RL.LIMIT's
/// policy), not on the options alone: the call's arguments after the key(s) and the error.
/// [`TABLE`] assumes limiters that refuse nothing (GCRA); these are the others.
#[derive(Debug, Clone, Copy)]
pub struct LimiterRule {
    pub command: &'static str,
    /// The limiter(s), the options, as typed (`<policy:…>` names a policy set first).
    pub args: &'static [&'static str],
    pub error: &'static str,
}

/// Every refusal of an option with a limiter.
pub const LIMITER_RULES: &[LimiterRule] = &[
    LimiterRule {
        command: "RL.ALL",
        args: &["FIXED", "10", "1h", "DELAY", "1s"],
        error: NO_DELAY_FIXED,
    },
    LimiterRule {
        command: "RL.ALL",
        args: &["SLIDING", "10", "1h", "DELAY", "1s"],
        error: NO_DELAY_SLIDING,
    },
    LimiterRule {
        command: "RL.ALL",
        args: &["SLIDINGCOUNTER", "10", "1h", "DELAY", "1s"],
        error: NO_DELAY_SLIDINGCOUNTER,
    },
    LimiterRule {
        command: "RL.ALL",
        args: &["CONCURRENCY", "10", "1h", "DEDUP", "x", "HOLD", "1h"],
        error: HOLD_NO_CONCURRENCY,
    },
    LimiterRule {
        command: "RL.ALL",
        args: &["CONCURRENCY", "10", "1h", "DEDUP", "x", "BESTEFFORT"],
        error: BESTEFFORT_NO_CONCURRENCY,
    },
    LimiterRule {
        command: "RL.ALL",
        args: &["CONCURRENCY", "10", "1h"],
        error: ALL_NEEDS_LEASE_ID,
    },
    LimiterRule {
        command: "RL.ALL",
        args: &["GCRA", "10", "10", "1h", "CHARGE", "2", "BESTEFFORT"],
        error: BESTEFFORT_CHARGES,
    },
    LimiterRule {
        command: "RL.CHECK",
        args: &["CONCURRENCY", "10", "1h", "BESTEFFORT"],
        error: BESTEFFORT_NO_CONCURRENCY,
    },
    LimiterRule {
        command: "RL.CHECK",
        args: &["GCRA", "10", "10", "1h", "CHARGE", "2", "BESTEFFORT"],
        error: BESTEFFORT_CHARGES,
    },
    LimiterRule {
        command: "RL.LIMIT",
        args: &["<policy:CONCURRENCY 10 1h>"],
        error: POLICY_NEEDS_LEASE_ID,
    },
];

/// The error of the first of `rules` that refuses the options for which `has` holds.
pub fn refusal(rules: &[Rule], has: impl Fn(Token) -> bool) -> Option<&'static str> {
    rules.iter().find_map(|rule| match *rule {
        Rule::Alone(a, e) => has(a).then_some(e),
        Rule::Pair(a, b, e) => (has(a) && has(b)).then_some(e),
        Rule::Needs(a, b, e) => (has(a) && !has(b)).then_some(e),
    })
}

/// `command`'s row.
pub fn of(command: &str) -> Option<&'static CommandOptions> {
    TABLE
        .iter()
        .find(|c| c.command.eq_ignore_ascii_case(command))
}

impl CommandOptions {
    /// What the command replies to its options `given`, in argument order: `Ok` when it takes
    /// them, else the error's text after `ERR `.
    pub fn verdict(&self, given: &[Token]) -> Result<(), String> {
        for (i, &t) in given.iter().enumerate() {
            if !self.takes.contains(&t) {
                return Err(format!("unknown option '{}'", String::from_utf8_lossy(t)));
            }
            if given.get(..i).is_some_and(|before| before.contains(&t)) {
                return Err(format!(
                    "syntax error, {} given more than once",
                    String::from_utf8_lossy(t)
                ));
            }
        }
        match refusal(self.rules, |t| given.contains(&t)) {
            Some(e) => Err(e.to_string()),
            None => Ok(()),
        }
    }

    /// The options it takes on their own or with others (not refused whatever comes with
    /// them): what its docs list.
    pub fn accepted(&self) -> impl Iterator<Item = Token> + '_ {
        self.takes.iter().copied().filter(|t| {
            !self
                .rules
                .iter()
                .any(|r| matches!(*r, Rule::Alone(a, _) if a == *t))
        })
    }
}

/// The table as JSON, for the client packages' tests (`docs/options.json`, which a unit test
/// holds equal to this): the shared options, then per command the options it takes, those it
/// accepts and its rules in order, then the refusals that depend on a limiter.
pub fn json() -> String {
    fn s(t: &[u8]) -> String {
        let mut out = String::from("\"");
        for c in String::from_utf8_lossy(t).chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
    fn list<'a>(items: impl Iterator<Item = &'a [u8]>) -> String {
        let items: Vec<String> = items.map(s).collect();
        format!("[{}]", items.join(", "))
    }
    let mut out = String::from("{\n");
    out.push_str(
        "  \"about\": \"The option table of redis-ratelimit (src/commands/call/options.rs), written by its unit test: \
         per command the options it takes, those it accepts, and its refusals in the order it checks them \
         (refused: those options together; without: unless that option is given too).\",\n",
    );
    out.push_str(&format!(
        "  \"shared\": {},\n",
        list(SHARED.iter().copied())
    ));
    out.push_str("  \"commands\": {\n");
    let rows: Vec<String> = TABLE
        .iter()
        .map(|row| {
            let rules: Vec<String> = row
                .rules
                .iter()
                .map(|rule| match *rule {
                    Rule::Alone(a, e) => format!(
                        "{{\"refused\": {}, \"error\": {}}}",
                        list([a].into_iter()),
                        s(e.as_bytes())
                    ),
                    Rule::Pair(a, b, e) => format!(
                        "{{\"refused\": {}, \"error\": {}}}",
                        list([a, b].into_iter()),
                        s(e.as_bytes())
                    ),
                    Rule::Needs(a, b, e) => format!(
                        "{{\"refused\": {}, \"without\": {}, \"error\": {}}}",
                        list([a].into_iter()),
                        s(b),
                        s(e.as_bytes())
                    ),
                })
                .collect();
            let rules = match rules.is_empty() {
                true => "[]".to_string(),
                false => format!("[\n        {}\n      ]", rules.join(",\n        ")),
            };
            format!(
                "    {}: {{\n      \"takes\": {},\n      \"accepted\": {},\n      \"rules\": {}\n    }}",
                s(row.command.as_bytes()),
                list(row.takes.iter().copied()),
                list(row.accepted()),
                rules
            )
        })
        .collect();
    out.push_str(&rows.join(",\n"));
    out.push_str("\n  },\n  \"limiter_rules\": [\n");
    let limiter_rules: Vec<String> = LIMITER_RULES
        .iter()
        .map(|r| {
            format!(
                "    {{\"command\": {}, \"args\": {}, \"error\": {}}}",
                s(r.command.as_bytes()),
                list(r.args.iter().map(|a| a.as_bytes())),
                s(r.error.as_bytes())
            )
        })
        .collect();
    out.push_str(&limiter_rules.join(",\n"));
    out.push_str("\n  ]\n}\n");
    out
}
