-- Pattern: token bucket in a hash of {tokens, ts} (HMGET / HSET / PEXPIRE),
--          refilled continuously from the elapsed time on each request.
-- The comparison point for RL.TOKENBUCKET (and RL.LEAKYBUCKET, its mirror image
-- with the same state and the same calls).
--
-- KEYS[1]  the bucket key
-- ARGV[1]  capacity    tokens when full (the bucket starts full)
-- ARGV[2]  refill      tokens added per period
-- ARGV[3]  period_ms   refill period in milliseconds
-- ARGV[4]  cost        tokens this request takes (optional, default 1)
-- ARGV[5]  now_ms      evaluation time (optional; default: the server's TIME)
--
-- Reply: {granted, limit, remaining, retry_after_ms, reset_after_ms}
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local per_ms = tonumber(ARGV[2]) / tonumber(ARGV[3])
local cost = tonumber(ARGV[4] or '1') or 1
local now
if ARGV[5] and ARGV[5] ~= '' then
  now = tonumber(ARGV[5])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

local state = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens, ts = capacity, now
end
if now > ts then
  tokens = math.min(capacity, tokens + (now - ts) * per_ms)
  ts = now
end

if tokens < cost then
  local retry = -1
  if cost <= capacity then retry = math.ceil((cost - tokens) / per_ms) end
  return {0, capacity, math.floor(tokens), retry, math.ceil((capacity - tokens) / per_ms)}
end

tokens = tokens - cost
redis.call('HSET', key, 'tokens', tokens, 'ts', ts)
local reset_after = math.ceil((capacity - tokens) / per_ms)
if reset_after > 0 then
  redis.call('PEXPIRE', key, reset_after)
else
  redis.call('DEL', key)  -- full again: the fresh state needs no key
end
return {cost, capacity, math.floor(tokens), 0, reset_after}
