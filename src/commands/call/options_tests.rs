//! The option table's unit tests (`commands::call::options`): its texts are the errors', COMMAND DOCS
//! and the README agree with it.

use crate::commands::call::options::*;
use crate::commands::table::COMMANDS;
use crate::core::Kind;
use crate::error::RlError;

/// The universe is the parser's shared options and `WAIT`.
#[test]
fn the_universe_is_the_parsed_options() {
    assert_eq!(SHARED, crate::commands::call::args::SHARED);
    assert_eq!(&UNIVERSE[..SHARED.len()], SHARED);
    assert_eq!(UNIVERSE.len(), SHARED.len() + 1);
    for row in TABLE {
        for t in row.takes {
            assert!(UNIVERSE.contains(t), "{}", row.command);
        }
    }
}

/// The texts of the table are those the errors print.
#[test]
fn the_tables_texts_are_the_errors_texts() {
    for (kind, text) in [
        (Kind::Fixed, NO_DELAY_FIXED),
        (Kind::Sliding, NO_DELAY_SLIDING),
        (Kind::SlidingCounter, NO_DELAY_SLIDINGCOUNTER),
        (Kind::Concurrency, NO_DELAY_CONCURRENCY),
    ] {
        assert_eq!(RlError::NoDelay(kind).to_string(), format!("ERR {text}"));
    }
    assert_eq!(
        crate::core::concurrency::BESTEFFORT_NO_CONCURRENCY,
        BESTEFFORT_NO_CONCURRENCY
    );
    assert_eq!(
        crate::core::concurrency::ALL_NEEDS_LEASE_ID,
        ALL_NEEDS_LEASE_ID
    );
    assert_eq!(crate::core::multi::BESTEFFORT_CHARGES, BESTEFFORT_CHARGES);
    assert_eq!(
        RlError::UnknownOption("BESTEFFORT".into()).to_string(),
        format!("ERR {UNKNOWN_BESTEFFORT}")
    );
    assert_eq!(
        RlError::UnknownOption("DEDUP".into()).to_string(),
        format!("ERR {UNKNOWN_DEDUP}")
    );
}

/// COMMAND DOCS lists, for each command of the table, exactly the options it accepts.
#[test]
fn command_docs_list_the_accepted_options() {
    for row in TABLE {
        let name = row.command.to_ascii_lowercase();
        let cmd = COMMANDS
            .iter()
            .find(|c| c.name_str() == name)
            .unwrap_or_else(|| panic!("{name} has no row"));
        let shared = if cmd.doc.shared_options {
            crate::docs::SHARED_OPTIONS
        } else {
            &[]
        };
        let mut documented: Vec<&[u8]> = cmd
            .doc
            .args
            .iter()
            .chain(shared)
            .filter_map(|a| a.token.map(std::ffi::CStr::to_bytes))
            .filter(|t| UNIVERSE.contains(t))
            .collect();
        documented.sort();
        let mut accepted: Vec<&[u8]> = row.accepted().collect();
        accepted.sort();
        assert_eq!(
            documented
                .iter()
                .map(|t| String::from_utf8_lossy(t))
                .collect::<Vec<_>>(),
            accepted
                .iter()
                .map(|t| String::from_utf8_lossy(t))
                .collect::<Vec<_>>(),
            "{name}"
        );
    }
}

/// The README's option table lists the options of the limiter commands, and each command's
/// heading that lists options lists those it accepts.
#[test]
fn the_readme_agrees_with_the_table() {
    let readme = include_str!("../../../README.md");
    let start = readme
        .find("then any of these options, in any order:")
        .expect("the option table");
    let rows: Vec<&str> = readme[start..]
        .lines()
        .skip_while(|l| !l.starts_with("| option"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let mut listed: Vec<String> = rows
        .iter()
        .map(|l| {
            let cell = l.trim_start_matches("| `");
            cell.split([' ', '`'])
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    listed.sort();
    let mut gcra: Vec<String> = of("RL.GCRA")
        .unwrap()
        .accepted()
        .map(|t| String::from_utf8_lossy(t).into_owned())
        .collect();
    gcra.sort();
    assert_eq!(listed, gcra);
    // Headings with options: `### RL.CHECK key limiter [COST n] ...`.
    for heading in readme.lines().filter(|l| l.starts_with("### RL.")) {
        let name = heading
            .trim_start_matches("### ")
            .split(' ')
            .next()
            .unwrap_or_default();
        // The limiter commands' headings show their own options; the shared ones are in
        // the table above.
        let Some(row) = of(name).filter(|r| r.takes != SHARED) else {
            continue;
        };
        // The part for this command (a heading may name two: `... / RL.RELEASE ...`).
        let own = heading.split(" / ").next().unwrap_or_default();
        if !own.contains('[') || own.contains("[options]") {
            continue;
        }
        let mut shown: Vec<String> = own
            .split('[')
            .skip(1)
            .filter_map(|o| o.split([' ', ']']).next())
            .map(str::to_string)
            .filter(|t| UNIVERSE.contains(&t.as_bytes()))
            .collect();
        shown.sort();
        let mut accepted: Vec<String> = row
            .accepted()
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .collect();
        accepted.sort();
        assert_eq!(shown, accepted, "{heading}");
    }
}

#[test]
fn verdicts_follow_the_rules() {
    let acquire = of("rl.acquire").unwrap();
    assert_eq!(
        acquire.verdict(&[b"PEEK", WAIT]),
        Err(WAIT_PEEK.to_string())
    );
    assert_eq!(
        acquire.verdict(&[b"DEDUP", b"HOLD"]),
        Err(HOLD_NO_CONCURRENCY.to_string())
    );
    let gcra = of("RL.GCRA").unwrap();
    assert_eq!(gcra.verdict(&[b"HOLD", b"DEDUP"]), Ok(()));
    assert_eq!(gcra.verdict(&[b"HOLD"]), Err(HOLD_NEEDS_DEDUP.to_string()));
    assert_eq!(
        gcra.verdict(&[WAIT, WAIT]),
        Err("unknown option 'WAIT'".to_string())
    );
    assert_eq!(
        gcra.verdict(&[b"AT", b"AT"]),
        Err("syntax error, AT given more than once".to_string())
    );
}

/// `docs/options.json`, which the client packages' tests read, is the table
/// (`RL_WRITE_OPTIONS_JSON=1 cargo test --lib options_json` writes it anew).
#[test]
fn options_json_is_the_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/options.json");
    let want = json();
    if std::env::var_os("RL_WRITE_OPTIONS_JSON").is_some() {
        std::fs::write(path, &want).unwrap();
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "docs/options.json is not the option table: RL_WRITE_OPTIONS_JSON=1 cargo test --lib options_json"
    );
}
