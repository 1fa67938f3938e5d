"use strict";

const core = require("./core");
const { RateLimiter, RateLimitExceeded } = require("./client");
const { rateLimitHeaders, moreQuotaCharges, partitionKey } = require("./headers");
const { rateLimit } = require("./express");
const { RateLimitStore } = require("./store");
const { RateLimitModule } = require("./node-redis");
const { installIoredis } = require("./ioredis");
const { parseLimit } = require("./limits");
const { ipKey, clientAddress, byAddress } = require("./keys");
const { ModuleNotLoadedError, NotConnectedError, LimiterTimeoutError } = require("./errors");
const counter = require("./counter");

module.exports = {
  RateLimiter,
  RateLimitExceeded,
  ModuleNotLoadedError,
  NotConnectedError,
  LimiterTimeoutError,
  Result: core.Result,
  parseResult: core.parseResult,
  parseInfo: core.parseInfo,
  durationMs: core.durationMs,
  ...core.limiters,
  parseLimit,
  rateLimitHeaders,
  moreQuotaCharges,
  partitionKey,
  rateLimit,
  RateLimitStore,
  RateLimitModule,
  installIoredis,
  ipKey,
  clientAddress,
  byAddress,
  SlidingWindowCounterLocal: counter.SlidingWindowCounterLocal,
  SlidingWindowCounterDistributed: counter.SlidingWindowCounterDistributed,
  SlidingWindowCounterRedis: counter.SlidingWindowCounterRedis,
};
