//! Redis Cluster: every command declares its keys, so a node answers MOVED for keys it does not
//! serve, and a multi-key call must keep its keys in one slot.

mod common;
use common::*;

use std::time::Duration;

fn cluster_node() -> Server {
    Server::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ])
}

/// Three masters sharing the slots, met and agreed.
fn three_masters() -> Vec<Server> {
    let nodes: Vec<Server> = (0..3).map(|_| cluster_node()).collect();
    let ranges = [("0", "5460"), ("5461", "10922"), ("10923", "16383")];
    for (node, (from, to)) in nodes.iter().zip(ranges) {
        node.conn().ok(&["CLUSTER", "ADDSLOTSRANGE", from, to]);
    }
    let first = nodes[0].conn().port().to_string();
    for node in &nodes[1..] {
        node.conn()
            .ok(&["CLUSTER", "MEET", "127.0.0.1", first.as_str()]);
    }
    for node in &nodes {
        let mut c = node.conn();
        wait_until(
            "cluster state ok on every node",
            Duration::from_secs(20),
            || {
                matches!(c.cmd(&["CLUSTER", "INFO"]), Reply::Bulk(ref b)
                if String::from_utf8_lossy(b).contains("cluster_state:ok"))
            },
        );
    }
    nodes
}

#[test]
fn cluster_nodes_redirect_every_command_to_the_key_owner() {
    let nodes = three_masters();
    let key = "user:42";
    let slot = nodes[0].conn().int(&["CLUSTER", "KEYSLOT", key]);
    let owner = match slot {
        0..=5460 => 0,
        5461..=10922 => 1,
        _ => 2,
    };
    let commands: [&[&str]; 8] = [
        &["RL.GCRA", key, "10", "1", "1s"],
        &["RL.TOKENBUCKET", key, "10", "1", "1s"],
        &["RL.LEAKYBUCKET", key, "10", "1", "1s"],
        &["RL.FIXED", key, "10", "1s"],
        &["RL.SLIDINGCOUNTER", key, "10", "1s"],
        &["CL.THROTTLE", key, "10", "1", "1"],
        &["RL.STREAMCOUNT", key, "1s"],
        &["RL.INFO", key],
    ];
    for (i, node) in nodes.iter().enumerate() {
        let mut c = node.conn();
        for cmd in commands {
            let reply = c.cmd(cmd);
            if i == owner {
                assert!(
                    !matches!(reply, Reply::Error(ref e) if e.starts_with("MOVED")),
                    "{cmd:?}: {reply:?}"
                );
            } else {
                let Reply::Error(e) = reply else {
                    panic!("{cmd:?} on a non-owner: {reply:?}")
                };
                assert!(e.starts_with(&format!("MOVED {slot} ")), "{cmd:?}: {e}");
            }
            // Each command then runs on the owner for a fresh key of its own.
            let _ = nodes[owner].conn().cmd(&["DEL", key]);
        }
    }
    // RL.ALL: keys in one slot (hash tag) route to their owner; keys in two slots are refused.
    let mut owner_conn = nodes[owner].conn();
    let tagged = [
        "RL.ALL",
        "2",
        "{user:42}:s",
        "{user:42}:m",
        "GCRA",
        "5",
        "5",
        "1s",
        "GCRA",
        "100",
        "100",
        "1m",
    ];
    let slot_tagged = owner_conn.int(&["CLUSTER", "KEYSLOT", "{user:42}:s"]);
    let tagged_owner = nodes
        .iter()
        .position(|n| {
            !matches!(n.conn().cmd(&["RL.INFO", "{user:42}:s"]), Reply::Error(ref e) if e.starts_with("MOVED"))
        })
        .unwrap();
    assert_eq!(
        nodes[tagged_owner].conn().ints(&tagged)[0],
        1,
        "slot {slot_tagged}"
    );
    let err = nodes[tagged_owner].conn().err(&[
        "RL.ALL", "2", "a", "b", "GCRA", "1", "1", "1s", "GCRA", "1", "1", "1s",
    ]);
    assert!(
        err.starts_with("CROSSSLOT") || err.starts_with("MOVED"),
        "{err}"
    );
    // RL.SETTLE declares its keys the same way: one slot settles, two slots are refused.
    let settle =
        |keys: [&str; 2]| ["RL.SETTLE", "2", keys[0], keys[1], "req", "1", "1"].map(String::from);
    let reply = nodes[tagged_owner]
        .conn()
        .cmd(&settle(["{user:42}:s", "{user:42}:m"]));
    assert!(reply.as_array().is_some_and(|r| r.len() == 2), "{reply:?}");
    let err = nodes[tagged_owner].conn().err(&settle(["a", "b"]));
    assert!(
        err.starts_with("CROSSSLOT") || err.starts_with("MOVED"),
        "{err}"
    );
}
