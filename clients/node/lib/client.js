"use strict";
// RateLimiter: the module's commands over ioredis or node-redis, with typed results.

const crypto = require("node:crypto");
const c = require("./core");
const { ModuleNotLoadedError, NotConnectedError, moduleError } = require("./errors");
const b = require("./backend");

class RateLimitExceeded extends Error {
  constructor(result) {
    super(`rate limit exceeded (${result.never ? "never: the cost is above the limit" : `retry after ${result.retryAfterMs} ms`})`);
    this.name = "RateLimitExceeded";
    this.result = result;
  }
}

// The connection's state: "ready", "closed" (ended for good, or node-redis never connected) or a
// state it may leave for "ready" by itself (connecting, reconnecting, ioredis' lazy "wait").
function connectionState(client) {
  if (client && typeof client.status === "string") {
    if (client.status === "ready") return "ready";
    return client.status === "end" ? "closed" : client.status;
  }
  if (client && typeof client.isReady === "boolean") {
    if (client.isReady) return "ready";
    return client.isOpen ? "reconnecting" : "closed";
  }
  return "ready";
}

// Wait until the client is ready, at most until `deadline` (Unix ms). A limiter command is only
// ever written on a ready connection: never into ioredis' or node-redis' offline queue, from
// which it would be sent (and charged) after the request that made it was answered.
function whenReady(client, deadline) {
  const state = connectionState(client);
  if (state === "ready") return null;
  if (state === "closed") return Promise.reject(new NotConnectedError(client.status === "end" ? "the connection was closed" : "connect() was not called"));
  if (state === "wait" && typeof client.connect === "function") client.connect().catch(() => {});
  return new Promise((resolve, reject) => {
    const left = deadline - Date.now();
    let timer = null;
    const done = () => {
      clearTimeout(timer);
      client.removeListener("ready", done);
      resolve();
    };
    if (left <= 0) return reject(new NotConnectedError(state));
    timer = setTimeout(() => {
      client.removeListener("ready", done);
      reject(new NotConnectedError(connectionState(client)));
    }, left);
    client.on("ready", done);
  });
}

const PING = "*1\r\n$4\r\nPING\r\n";

// ioredis' Command class, as the client's own call() builds it (ioredis' instances do not lead
// back to it: their constructor is EventEmitter). Found once per client by letting call() build
// a PING and taking it from sendCommand before anything is written; null when call() does not
// reach sendCommand at once (enableAutoPipelining), then commands go through call().
const commandClasses = new WeakMap();
function commandClass(client) {
  if (commandClasses.has(client)) return commandClasses.get(client);
  let found = null;
  const own = Object.prototype.hasOwnProperty.call(client, "sendCommand");
  const original = client.sendCommand;
  client.sendCommand = function probe(command) {
    found = command && typeof command.toWritable === "function" ? command.constructor : null;
    command.reject(new Error("probe"));
    return command.promise;
  };
  try {
    const p = client.call("PING");
    if (p && typeof p.catch === "function") p.catch(() => {});
  } finally {
    if (own) client.sendCommand = original;
    else delete client.sendCommand;
  }
  commandClasses.set(client, found);
  return found;
}

// One command on an ioredis client (or Cluster) whose bytes are only written before `deadline`:
// if ioredis writes it later (a command it resends after a reconnection,
// autoResendUnfulfilledCommands, or one that slipped into its offline queue as the connection
// dropped), PING goes out in its place (one command, one reply: the connection's replies stay in
// step) and the call has already failed with NotConnectedError.
function ioredisSend(client, args, deadline, encoding) {
  const Command = commandClass(client);
  if (Command == null) return encoding ? client.call(...args) : client.callBuffer(...args);
  const options = { keyPrefix: client.options && client.options.keyPrefix, replyEncoding: encoding };
  const cmd = new Command(String(args[0]), args.slice(1), options);
  const write = cmd.toWritable.bind(cmd);
  cmd.toWritable = (socket) => {
    if (Date.now() < deadline) return write(socket);
    cmd.reject(new NotConnectedError("the call's time ran out before the command could be written"));
    return PING;
  };
  return client.sendCommand(cmd);
}

// How to send one command on a client: ioredis has call(), node-redis sendCommand(). node-redis
// gets an AbortSignal at the deadline: a command still waiting to be written is dropped.
function transport(client) {
  if (client && typeof client.call === "function") return (args, deadline) => ioredisSend(client, args, deadline, "utf8");
  if (client && typeof client.sendCommand === "function") {
    return (args, deadline) => client.sendCommand(args.map((a) => (Buffer.isBuffer(a) ? a : String(a))),
      { abortSignal: AbortSignal.timeout(Math.max(1, deadline - Date.now())) });
  }
  throw new TypeError("expected an ioredis client (call) or a node-redis client (sendCommand)");
}

// The same, with bulk replies as Buffers (RL.POLICY DUMP's binary payload).
function bufferTransport(client) {
  if (typeof client.callBuffer === "function") return (args, deadline) => ioredisSend(client, args, deadline, null);
  // node-redis: blob strings (RESP type 36) as Buffers.
  return (args, deadline) => client.sendCommand(args.map((a) => (Buffer.isBuffer(a) ? a : String(a))),
    { typeMapping: { 36: Buffer }, abortSignal: AbortSignal.timeout(Math.max(1, deadline - Date.now())) });
}

class RateLimiter {
  /** @param client an ioredis Redis/Cluster or a node-redis client (RESP2 or RESP3).
   * @param options.timeoutMs how long a call waits for a connection that is not ready (default
   * 500); the command is never queued in the client's offline queue. */
  constructor(client, options = {}) {
    this.client = client;
    this.raw = transport(client);
    this.rawBuffer = bufferTransport(client);
    this.timeoutMs = options.timeoutMs ?? 500;
    this.deadline = null;
    const backend = options.backend ?? "auto";
    if (!b.BACKENDS.includes(backend)) throw new RangeError(`backend must be "auto", "module" or "lua", not ${JSON.stringify(backend)}`);
    // backend: the choice; resolved: "module" or "lua" once known (auto asks the server once).
    this.shared = { moduleChecked: null, backend, resolved: backend === "auto" ? null : backend, resolving: null };
    this.logger = options.logger ?? console;
  }

  /** The backend that runs this limiter's commands: "module" or "lua" (under "auto", asked of
   * the server once with COMMAND INFO rl.gcra, and logged). */
  async backend() {
    const root = this.shared;
    if (root.resolved) return root.resolved;
    if (!root.resolving) {
      root.resolving = this.sendRaw(["COMMAND", "INFO", "rl.gcra"]).then((reply) => {
        root.resolved = b.modulePresent(reply) ? "module" : "lua";
        const say = typeof this.logger.info === "function" ? this.logger.info : this.logger.warn;
        say.call(this.logger, root.resolved === "module"
          ? "redis-ratelimit: backend auto: the module is loaded, using it"
          : "redis-ratelimit: backend auto: no redis-ratelimit module on this server, using the script backend " +
            "(lua/ratelimit.lua): RL.GCRA, RL.TOKENBUCKET, RL.FIXED, RL.SLIDINGCOUNTER, RL.ALL only");
        return root.resolved;
      }).finally(() => { root.resolving = null; });
    }
    return root.resolving;
  }

  /** The key a limiter command of this limiter writes: `key`, or the script's own `key:lua`. */
  async storageKey(key) {
    return (await this.backend()) === "lua" ? b.scriptKey(key) : key;
  }

  /** A view of this limiter whose commands are not sent after `deadline` (Unix ms). */
  until(deadline) {
    return Object.create(this, { deadline: { value: deadline } });
  }

  async send(args) {
    if (b.isLimiterCommand(String(args[0]).toUpperCase()) && (await this.backend()) === "lua") {
      const command = b.evalshaArgs(args);
      try {
        return await this.sendRaw(command);
      } catch (err) {
        if (!b.isNoScript(err)) throw b.scriptError(err);
      }
      try {
        return await this.sendRaw(["EVAL", b.SCRIPT, ...command.slice(2)]);
      } catch (err) {
        throw b.scriptError(err);
      }
    }
    return this.sendRaw(args);
  }

  async sendRaw(args) {
    const deadline = this.deadline ?? Date.now() + this.timeoutMs;
    if (Date.now() >= deadline) throw new NotConnectedError("the call's time ran out");
    const wait = whenReady(this.client, deadline);
    if (wait) await wait;
    try {
      return await this.raw(args, deadline);
    } catch (err) {
      throw moduleError(err);
    }
  }

  async sendBuffer(args) {
    if (b.isLimiterCommand(String(args[0]).toUpperCase()) && (await this.backend()) === "lua") b.evalshaArgs(args);
    const deadline = this.deadline ?? Date.now() + this.timeoutMs;
    const wait = whenReady(this.client, deadline);
    if (wait) await wait;
    return this.rawBuffer(args, deadline);
  }

  /** Resolves when the server has the module (COMMAND INFO rl.gcra), else rejects with a
   * ModuleNotLoadedError saying how to load it. A success is remembered (per RateLimiter). */
  checkModule() {
    const root = this.shared;
    if (root.resolved === "lua") return Promise.resolve(true);
    if (root.backend === "auto" && !root.resolved) return this.backend().then(() => this.checkModule());
    if (root.moduleChecked) return root.moduleChecked;
    const check = this.send(["COMMAND", "INFO", "rl.gcra"]).then((reply) => {
      if (!Array.isArray(reply) || reply.length === 0 || reply[0] == null) {
        throw new ModuleNotLoadedError("COMMAND INFO rl.gcra knows no such command");
      }
      return true;
    });
    root.moduleChecked = check;
    check.catch(() => { if (root.moduleChecked === check) root.moduleChecked = null; });
    return check;
  }

  async result(args, cost) {
    return c.parseResult(await this.send(args), cost);
  }

  apply(key, spec, opts = {}) {
    if (spec.word === "CONCURRENCY") throw new TypeError("a concurrency limiter takes a lease id: use acquire() or withLease()");
    return this.result([spec.command, key, ...spec.params, ...c.optionArgs(opts)], opts.cost ?? 1);
  }
  gcra(key, burst, rate, period, opts) { return this.apply(key, c.limiters.gcra(burst, rate, period), opts); }
  tokenBucket(key, capacity, refill, period, opts) { return this.apply(key, c.limiters.tokenBucket(capacity, refill, period), opts); }
  leakyBucket(key, capacity, rate, period, opts) { return this.apply(key, c.limiters.leakyBucket(capacity, rate, period), opts); }
  fixed(key, limit, window, opts = {}) { return this.apply(key, c.limiters.fixed(limit, window, opts), opts); }
  sliding(key, limit, window, opts = {}) { return this.apply(key, c.limiters.sliding(limit, window, opts), opts); }
  slidingCounter(key, limit, window, opts) { return this.apply(key, c.limiters.slidingCounter(limit, window), opts); }

  /** RL.ALL: every limiter grants or none is charged. `limiters`: {key: spec} or [[key, spec], ...];
   * with opts.policy, the keys, one per limiter of the named policy (POLICY name). */
  all(limiters, opts = {}) {
    return this.result(["RL.ALL", ...c.allOrPolicyArgs(limiters, opts.policy), ...c.optionArgs(opts)], opts.cost ?? 1);
  }

  /** RL.CHECK: the PEEK reply from a read-only command. */
  check(key, spec, opts = {}) {
    const o = { cost: opts.cost, bestEffort: opts.bestEffort, shadow: opts.shadow, detail: opts.detail, at: opts.at };
    return this.result(["RL.CHECK", key, ...c.specArgs(spec), ...c.optionArgs(o)], opts.cost ?? 1);
  }

  /** RL.CHECKALL: the PEEK reply of all() from a read-only command (runs on replicas). */
  checkAll(limiters, opts = {}) {
    const o = { cost: opts.cost, shadow: opts.shadow, detail: opts.detail, at: opts.at };
    return this.result(["RL.CHECKALL", ...c.allOrPolicyArgs(limiters, opts.policy), ...c.optionArgs(o)], opts.cost ?? 1);
  }

  /** RL.LIMIT key policy: the named one-limiter policy on key, with the options and reply of its
   * limiter's own command. */
  limit(key, policy, opts = {}) {
    return this.result(["RL.LIMIT", key, String(policy), ...c.optionArgs(opts)], opts.cost ?? 1);
  }

  /** RL.POLICY SET: define or replace a policy; resolves to its version. */
  async policySet(name, limiters, opts = {}) {
    return Number(await this.send(c.policySetArgs(name, limiters, opts)));
  }
  /** RL.POLICY GET: { name, args, shadow, desc }, null for an unknown name. */
  async policyGet(name) { return c.parsePolicy(name, await this.send(["RL.POLICY", "GET", name])); }
  /** RL.POLICY DEL: true if the policy existed. */
  async policyDel(name) { return Number(await this.send(["RL.POLICY", "DEL", name])) === 1; }
  /** RL.POLICY LIST: { name: version }. */
  async policyList() { return c.parsePolicyList(await this.send(["RL.POLICY", "LIST"])); }
  /** RL.POLICY DUMP: every policy as one binary payload (a Buffer). */
  async policyDump() {
    const reply = await this.sendBuffer(["RL.POLICY", "DUMP"]);
    return Buffer.isBuffer(reply) ? reply : Buffer.from(String(reply));
  }
  /** RL.POLICY RESTORE payload [MERGE]: replace every policy with the payload's, or with
   * merge add or replace only the payload's, each policy added or changed taking this server's
   * next version. */
  async policyRestore(payload, opts = {}) {
    await this.send(["RL.POLICY", "RESTORE", payload, ...(opts.merge ? ["MERGE"] : [])]);
  }

  async refund(key, units, opts = {}) {
    const args = ["RL.REFUND", key, String(c.count(units, "units"))];
    if (opts.dedup != null) args.push("DEDUP", opts.dedup);
    return c.parseOptionalResult(await this.send([...args, ...c.atArgs(opts)]), 0);
  }

  /** RL.SETTLE: settle the reservation `id` (made with hold and dedup) with the units really
   * used, one per key; one Result per key (null for a missing key): granted is what the id is
   * charged there after the settle. */
  async settle(keys, id, units, opts = {}) {
    return c.parseSettle(await this.send(["RL.SETTLE", ...c.settleArgs(keys, id, units), ...c.atArgs(opts)]));
  }

  /** RL.BLOCK: returns the block's remaining ms. */
  async block(key, duration, opts = {}) {
    return Number(await this.send(["RL.BLOCK", key, c.durationArg(duration), ...c.atArgs(opts)]));
  }
  async unblock(key) { return Number(await this.send(["RL.UNBLOCK", key])) === 1; }

  acquire(key, limit, lease, id, opts = {}) {
    const s = c.limiters.concurrency(limit, lease);
    const o = { cost: opts.cost, peek: opts.peek, shadow: opts.shadow, block: opts.block, detail: opts.detail, at: opts.at };
    const wait = opts.wait == null ? [] : ["WAIT", c.durationArg(opts.wait)];
    return this.result(["RL.ACQUIRE", key, ...s.params, "ID", id, ...c.optionArgs(o), ...wait], opts.cost ?? 1);
  }
  async release(key, id, opts = {}) { return Number(await this.send(["RL.RELEASE", key, id, ...c.atArgs(opts)])); }

  /** Run fn(lease) holding units of a concurrency limiter; released after. Throws RateLimitExceeded. */
  async withLease(key, limit, lease, fn, opts = {}) {
    const id = opts.id ?? crypto.randomUUID();
    const result = await this.acquire(key, limit, lease, id, { cost: opts.cost });
    if (!result.allowed) throw new RateLimitExceeded(result);
    try {
      return await fn({ id, result, renew: () => this.acquire(key, limit, lease, id, { cost: opts.cost }) });
    } finally {
      await this.release(key, id);
    }
  }

  async streamCount(key, window, opts = {}) {
    const args = ["RL.STREAMCOUNT", key, c.durationArg(window)];
    if (opts.add != null && opts.add !== 1) args.push("ADD", String(c.count(opts.add, "add", 0)));
    if (opts.limit != null) args.push("LIMIT", String(c.count(opts.limit, "limit")));
    return c.parseStreamCount(await this.send([...args, ...c.atArgs(opts)]));
  }

  async throttle(key, maxBurst, countPerPeriod, periodS, quantity = 1, opts = {}) {
    const args = ["CL.THROTTLE", key, String(maxBurst), String(countPerPeriod), String(periodS), String(quantity)];
    return c.parseThrottle(await this.send([...args, ...c.atArgs(opts)]));
  }

  async info(key) { return c.parseInfo(await this.send(["RL.INFO", key])); }
}

module.exports = { RateLimiter, RateLimitExceeded, connectionState, whenReady };
