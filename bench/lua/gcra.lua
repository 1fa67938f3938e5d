-- Pattern: GCRA as go-redis/redis_rate computes it: the theoretical arrival
--          time (TAT) is a float of seconds since 2017-01-01 kept in a string
--          key (GET / SET EX), the time comes from redis.call('TIME').
-- The comparison point for RL.GCRA and CL.THROTTLE.
--
-- KEYS[1]  the limiter key
-- ARGV[1]  burst       requests allowed at once
-- ARGV[2]  rate        requests per period, sustained
-- ARGV[3]  period_s    period in seconds
-- ARGV[4]  cost        units this request takes (optional, default 1)
-- ARGV[5]  now_ms      evaluation time (optional; default: the server's TIME)
--
-- Reply: {granted, remaining, retry_after_s, reset_after_s}
-- (the two durations as strings, as redis_rate returns them).
local key = KEYS[1]
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4] or '1') or 1

-- Seconds since 2017-01-01 keep microseconds exact in a double.
local epoch_2017 = 1483228800
local now
if ARGV[5] and ARGV[5] ~= '' then
  now = tonumber(ARGV[5]) / 1000 - epoch_2017
else
  local t = redis.call('TIME')
  now = (tonumber(t[1]) - epoch_2017) + tonumber(t[2]) / 1000000
end

local interval = period / rate
local tat = tonumber(redis.call('GET', key) or now)
if tat < now then tat = now end

local new_tat = tat + interval * cost
local allow_at = new_tat - interval * burst
local slack = now - allow_at
if slack < 0 then
  return {0, 0, tostring(-slack), tostring(tat - now)}
end

local reset_after = new_tat - now
if reset_after > 0 then
  redis.call('SET', key, new_tat, 'EX', math.ceil(reset_after))
end
return {cost, math.floor(slack / interval), '-1', tostring(reset_after)}
