"use strict";
// The script backend: lua/ratelimit.lua of the repository (lib/ratelimit.lua is a copy made by
// scripts/sync-lua.sh; a test checks it byte for byte), for servers that cannot load the module.
// A RateLimiter's backend is "auto" (the module when COMMAND INFO finds it, else the script;
// decided once per RateLimiter and logged), "module" or "lua".

const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");

const SCRIPT = fs.readFileSync(path.join(__dirname, "ratelimit.lua"), "utf8");
const SHA = crypto.createHash("sha1").update(SCRIPT).digest("hex");
/** What the script backend adds to a key: its keys are never the module's (the hash tag stays). */
const KEY_SUFFIX = ":lua";
const BACKENDS = ["auto", "module", "lua"];

const ONE_KEY = new Set(["RL.GCRA", "RL.TOKENBUCKET", "RL.FIXED", "RL.SLIDINGCOUNTER", "RL.CHECK"]);
const NUM_KEYS = new Set(["RL.ALL", "RL.CHECKALL"]);

/** What the script backend cannot do: it needs the redis-ratelimit module. */
class ModuleRequiredError extends Error {
  constructor(what, message) {
    super(message ?? `${what} needs the redis-ratelimit module (loadmodule /path/to/libredis_ratelimit.so); ` +
      "this limiter uses the script backend (backend \"lua\", or \"auto\" on a server without the module), " +
      "which does not support it");
    this.name = "ModuleRequiredError";
  }
}

const text = (a) => (Buffer.isBuffer(a) ? a.toString("utf8") : String(a));

function isLimiterCommand(name) {
  return name.startsWith("RL.") || name === "CL.THROTTLE";
}

function scriptKey(key) {
  return Buffer.isBuffer(key) ? Buffer.concat([key, Buffer.from(KEY_SUFFIX)]) : `${key}${KEY_SUFFIX}`;
}

/** The module command `args` as EVALSHA arguments, or a ModuleRequiredError. */
function evalshaArgs(args) {
  const name = text(args[0]).toUpperCase();
  if (ONE_KEY.has(name) && args.length >= 2) {
    return ["EVALSHA", SHA, "1", scriptKey(args[1]), name, ...args.slice(2)];
  }
  if (NUM_KEYS.has(name) && args.length >= 2) {
    const n = Number(text(args[1]));
    const keys = args.slice(2, 2 + n).map(scriptKey);
    return ["EVALSHA", SHA, String(n), ...keys, name, ...args.slice(2 + n)];
  }
  if (name === "RL.POLICY" || name === "RL.LIMIT") throw new ModuleRequiredError("policies (RL.POLICY, RL.LIMIT)");
  throw new ModuleRequiredError(name);
}

const isNoScript = (err) => Boolean(err && typeof err.message === "string" && err.message.startsWith("NOSCRIPT"));

/** The script's own refusal of a module-only option, as a ModuleRequiredError. */
function scriptError(err) {
  if (err && typeof err.message === "string" && err.message.includes("redis-ratelimit module")) {
    return new ModuleRequiredError("", err.message);
  }
  return err;
}

function modulePresent(reply) {
  return Array.isArray(reply) && reply.length > 0 && reply[0] != null;
}

module.exports = {
  SCRIPT, SHA, KEY_SUFFIX, BACKENDS, ModuleRequiredError, isLimiterCommand, scriptKey, evalshaArgs, isNoScript,
  scriptError, modulePresent,
};
