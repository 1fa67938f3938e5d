-- Pattern: sliding window counter on a stream
--          (XRANGE sum / XADD MINID ~ / PEXPIRE), one entry `count n` per request.
-- The comparison point for RL.STREAMCOUNT, which keeps this exact layout.
--
-- KEYS[1]  the stream key
-- ARGV[1]  window_ms   window length in milliseconds
-- ARGV[2]  add         units to add (>= 0)
-- ARGV[3]  limit       deny when total + add > limit (0 = no limit)
-- ARGV[4]  now_ms      evaluation time (optional; default: the server's clock via XADD *)
--
-- Reply: the window's total after this call, or -1 when denied.
local key = KEYS[1]
local window = tonumber(ARGV[1])
local add = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local now, id
if ARGV[4] and ARGV[4] ~= '' then
  now = math.floor(tonumber(ARGV[4]))
  id = string.format('%d-*', now)
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  id = '*'
end
local start = now - window

-- Entries whose ID time is >= now - window are in the window.
local total = 0
for _, entry in ipairs(redis.call('XRANGE', key, start, '+')) do
  total = total + tonumber(entry[2][2])
end

if limit > 0 and total + add > limit then
  return -1
end
if add > 0 then
  redis.call('XADD', key, 'MINID', '~', start, id, 'count', add)
  redis.call('PEXPIRE', key, window)
end
return total + add
