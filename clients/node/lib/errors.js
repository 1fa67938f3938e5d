"use strict";
// Errors of the limiter's own making, and how a failed call is told apart from an app's error.

const LOAD_HINT = "load it with `loadmodule /path/to/libredis_ratelimit.so` in redis.conf " +
  "(or `MODULE LOAD /path/to/libredis_ratelimit.so`), then restart or retry";

/** The server answers but has no redis-ratelimit module (RL.GCRA is an unknown command). */
class ModuleNotLoadedError extends Error {
  constructor(detail) {
    super(`the redis-ratelimit module is not loaded on this Redis server (${detail}): ${LOAD_HINT}`);
    this.name = "ModuleNotLoadedError";
  }
}

/** The connection is not ready (down, reconnecting, closed) and the call's time ran out before it
 * was; the command was never sent, so nothing was charged and nothing will be. */
class NotConnectedError extends Error {
  constructor(state) {
    super(`Redis is not connected (${state}): the limiter command was not sent`);
    this.name = "NotConnectedError";
  }
}

/** The limiter did not answer within timeoutMs. */
class LimiterTimeoutError extends Error {
  constructor(ms) {
    super(`the rate limiter did not answer within ${ms} ms`);
    this.name = "LimiterTimeoutError";
  }
}

const UNKNOWN = /^ERR unknown command '?(rl\.[a-z]+|cl\.throttle)'?/i;

/** A server's "unknown command 'RL.GCRA'" as a ModuleNotLoadedError; other errors unchanged. */
function moduleError(err) {
  const m = err && typeof err.message === "string" && UNKNOWN.exec(err.message);
  return m ? new ModuleNotLoadedError(`${m[1].toUpperCase()} is an unknown command`) : err;
}

module.exports = { ModuleNotLoadedError, NotConnectedError, LimiterTimeoutError, moduleError, LOAD_HINT };
