"use strict";
// The client's shared options are the module's: every option of optionArgs emits a token that
// COMMAND DOCS lists for the limiter commands (RL.GCRA takes them all), and every option listed
// there has a client option.

const test = require("node:test");
const assert = require("node:assert/strict");
const Redis = require("ioredis");
const { optionArgs } = require("../lib/core");
const { startServer } = require("./server");

// Each option of optionArgs with a value that makes it emit its token.
const OPTIONS = {
  cost: 2, peek: true, shadow: true, bestEffort: true, dedup: "id", hold: 1000, block: 1000,
  delay: 1000, detail: true, at: 1700000000000,
};

let server;
test.before(async () => { server = await startServer(); });
test.after(async () => { await server.stop(); });

function pairs(items) {
  const out = new Map();
  for (let i = 0; i + 1 < items.length; i += 2) out.set(String(items[i]), items[i + 1]);
  return out;
}

async function documented(command) {
  const client = new Redis(server.port, "127.0.0.1", { protocol: 2 });
  try {
    const reply = await client.call("COMMAND", "DOCS", command);
    const doc = pairs([...pairs(reply).values()][0]);
    const tokens = new Set();
    for (const arg of doc.get("arguments") || []) {
      const token = pairs(arg).get("token");
      if (token != null) tokens.add(String(token));
    }
    return tokens;
  } finally {
    client.disconnect();
  }
}

function emitted(name) {
  const o = { [name]: OPTIONS[name] };
  if (name === "hold") o.dedup = "id";
  const out = optionArgs(o).filter((a) => typeof a === "string" && /^[A-Z]+$/.test(a));
  return new Set(name === "hold" ? out.filter((t) => t !== "DEDUP") : out);
}

test("every client option emits a documented option", async () => {
  const docs = await documented("rl.gcra");
  for (const name of Object.keys(OPTIONS)) {
    const tokens = [...emitted(name)];
    assert.equal(tokens.length, 1, `${name}: ${tokens}`);
    assert.ok(docs.has(tokens[0]), `${name}: ${tokens[0]} not in ${[...docs]}`);
  }
});

test("every documented option has a client option", async () => {
  const docs = await documented("rl.gcra");
  const covered = new Set(Object.keys(OPTIONS).flatMap((n) => [...emitted(n)]));
  assert.deepEqual([...docs].sort(), [...covered].sort());
});

// The module's option table (docs/options.json, written from src/commands/call/options.rs and held
// equal to it by the module's unit tests).
const TABLE = JSON.parse(
  require("node:fs").readFileSync(require("node:path").join(__dirname, "..", "..", "..", "docs", "options.json"), "utf8"),
);
const TOKENS = {
  cost: "COST", peek: "PEEK", shadow: "SHADOW", bestEffort: "BESTEFFORT", dedup: "DEDUP", hold: "HOLD",
  block: "BLOCK", delay: "DELAY", detail: "DETAIL", at: "AT",
};

test("the client options are the option table's shared options", () => {
  const covered = new Set(Object.keys(OPTIONS).flatMap((n) => [...emitted(n)]));
  assert.deepEqual([...covered].sort(), [...TABLE.shared].sort());
});

test("optionArgs refuses exactly the pairs RL.GCRA refuses", () => {
  const rules = TABLE.commands["RL.GCRA"].rules;
  const names = Object.keys(OPTIONS);
  for (const [i, a] of names.entries()) {
    for (const b of names.slice(i)) {
      const tokens = new Set([TOKENS[a], TOKENS[b]]);
      const want = rules.some((r) => r.refused.every((t) => tokens.has(t)) && !tokens.has(r.without));
      let refused = false;
      try {
        optionArgs({ [a]: OPTIONS[a], [b]: OPTIONS[b] });
      } catch (e) {
        if (!(e instanceof RangeError)) throw e;
        refused = true;
      }
      assert.equal(refused, want, `${a} with ${b}`);
    }
  }
});
