"use strict";
// ioredis: the module's commands as built-in commands with reply transformers, so that
// `redis["rl.gcra"](key, 10, 5, "1s")` resolves to a Result like every other integration.

const c = require("./core");

const TRANSFORMERS = {
  "rl.gcra": c.parseResult, "rl.tokenbucket": c.parseResult, "rl.leakybucket": c.parseResult,
  "rl.fixed": c.parseResult, "rl.sliding": c.parseResult, "rl.slidingcounter": c.parseResult,
  "rl.all": c.parseResult, "rl.check": c.parseResult, "rl.checkall": c.parseResult, "rl.acquire": c.parseResult,
  "rl.limit": c.parseResult,
  "rl.refund": (r) => c.parseOptionalResult(r), "rl.settle": c.parseSettle,
  "rl.info": c.parseInfo, "cl.throttle": c.parseThrottle, "rl.streamcount": c.parseStreamCount,
  "rl.block": Number, "rl.unblock": (r) => Number(r) === 1, "rl.release": Number,
};

/** Add the commands to an ioredis client (or Cluster) and register their reply transformers
 * (ioredis' transformers are global: every client's `rl.*` built-ins then return typed results;
 * `call()` stays raw). `Command` is ioredis' export of that name. */
function installIoredis(redis, Command) {
  for (const [name, transform] of Object.entries(TRANSFORMERS)) {
    redis.addBuiltinCommand(name);
    Command.setReplyTransformer(name, (reply) => transform(reply));
  }
  return redis;
}

module.exports = { installIoredis, IOREDIS_COMMANDS: Object.keys(TRANSFORMERS) };
