-- Pattern: sliding window log on a hash (HGETALL / HDEL / HINCRBY / PEXPIRE),
--          one field per time bucket holding that bucket's count.
-- The comparison point for RL.SLIDING ... PRECISION <bucket>.
--
-- KEYS[1]  the limiter key
-- ARGV[1]  limit       requests allowed in one window
-- ARGV[2]  window_ms   window length in milliseconds
-- ARGV[3]  bucket_ms   width of one field's time bucket (1 = one field per millisecond)
-- ARGV[4]  cost        units this request takes (optional, default 1)
-- ARGV[5]  now_ms      evaluation time (optional; default: the server's TIME)
--
-- Reply: {granted, limit, remaining, retry_after_ms, reset_after_ms}
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local bucket = tonumber(ARGV[3])
local cost = tonumber(ARGV[4] or '1') or 1
local now
if ARGV[5] and ARGV[5] ~= '' then
  now = math.floor(tonumber(ARGV[5]))
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local records = redis.call('HGETALL', key)
local used = 0
local oldest = nil
local stale = {}
for i = 1, #records, 2 do
  local ts = tonumber(records[i])
  if ts <= now - window then
    stale[#stale + 1] = records[i]
  else
    used = used + tonumber(records[i + 1])
    if oldest == nil or ts < oldest then oldest = ts end
  end
end
if #stale > 0 then
  redis.call('HDEL', key, unpack(stale))
end

if used + cost > limit then
  local retry = -1
  if cost <= limit and oldest then retry = oldest + window - now end
  return {0, limit, limit - used, retry, window}
end

local field = now - (now % bucket)
redis.call('HINCRBY', key, field, cost)
redis.call('PEXPIRE', key, window)
return {cost, limit, limit - used - cost, 0, window}
