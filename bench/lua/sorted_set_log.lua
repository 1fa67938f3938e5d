-- Pattern: sliding window log on a sorted set
--          (ZREMRANGEBYSCORE / ZCARD / ZADD / PEXPIRE), one member per request.
-- The comparison point for RL.SLIDING (exact, no PRECISION).
--
-- KEYS[1]  the limiter key
-- ARGV[1]  limit       requests allowed in one window
-- ARGV[2]  window_ms   window length in milliseconds
-- ARGV[3]  cost        units this request takes (optional, default 1)
-- ARGV[4]  now_ms      evaluation time (optional; default: the server's TIME)
--
-- Reply: {granted, limit, remaining, retry_after_ms, reset_after_ms}
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1') or 1
local now_us
if ARGV[4] and ARGV[4] ~= '' then
  now_us = math.floor(tonumber(ARGV[4]) * 1000)
else
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local now = math.floor(now_us / 1000)

-- An entry counts while its timestamp is > now - window.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local used = redis.call('ZCARD', key)

if used + cost > limit then
  local retry = -1
  if cost <= limit then
    -- Wait until enough of the oldest entries have left the window.
    local oldest = redis.call('ZRANGE', key, used + cost - limit - 1, used + cost - limit - 1, 'WITHSCORES')
    retry = tonumber(oldest[2]) + window - now
  end
  return {0, limit, limit - used, retry, window}
end

-- Members must be unique: the request time in microseconds plus the count so far.
for i = 1, cost do
  redis.call('ZADD', key, now, string.format('%d:%d', now_us, used + i))
end
redis.call('PEXPIRE', key, window)
return {cost, limit, limit - used - cost, 0, window}
