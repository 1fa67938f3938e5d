-- Pattern: fixed window counter (INCRBY / PEXPIRE): the window starts with the
--          first request and the key expires when it ends. As in the usual
--          script, a denied request is counted too.
-- The comparison point for RL.FIXED and RL.SLIDINGCOUNTER.
--
-- KEYS[1]  the counter key
-- ARGV[1]  limit       requests allowed in one window
-- ARGV[2]  window_ms   window length in milliseconds
-- ARGV[3]  cost        units this request takes (optional, default 1)
--
-- Reply: {granted, limit, remaining}
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1') or 1

local used = redis.call('INCRBY', key, cost)
if used == cost then
  redis.call('PEXPIRE', key, window)
end
if used > limit then
  return {0, limit, 0}
end
return {cost, limit, limit - used}
