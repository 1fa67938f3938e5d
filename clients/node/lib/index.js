"use strict";

const core = require("./core");
const { RateLimiter, RateLimitExceeded } = require("./client");
const { rateLimitHeaders } = require("./headers");
const { rateLimit } = require("./express");
const { RateLimitStore } = require("./store");
const { RateLimitModule } = require("./node-redis");
const { installIoredis } = require("./ioredis");

module.exports = {
  RateLimiter,
  RateLimitExceeded,
  Result: core.Result,
  parseResult: core.parseResult,
  parseInfo: core.parseInfo,
  durationMs: core.durationMs,
  ...core.limiters,
  rateLimitHeaders,
  rateLimit,
  RateLimitStore,
  RateLimitModule,
  installIoredis,
};
