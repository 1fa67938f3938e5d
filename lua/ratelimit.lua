-- redis-ratelimit, script backend: RL.GCRA, RL.TOKENBUCKET, RL.FIXED, RL.SLIDINGCOUNTER and
-- RL.ALL (and the read-only RL.CHECK, RL.CHECKALL) as one Lua script, for servers that cannot load the module (managed Redis and Valkey).
--
--   EVALSHA <sha> 1 <key> RL.GCRA <burst> <rate> <period> [COST n] [PEEK] [BESTEFFORT]
--   EVALSHA <sha> 1 <key> RL.TOKENBUCKET <capacity> <refill> <period> [options]
--   EVALSHA <sha> 1 <key> RL.FIXED <limit> <window> [OFFSET d] [options]
--   EVALSHA <sha> 1 <key> RL.SLIDINGCOUNTER <limit> <window> [options]
--   EVALSHA <sha> <numkeys> <key> [key ...] RL.ALL <limiter> [limiter ...] [options]
--   EVALSHA <sha> 1 <key> RL.CHECK <limiter> [COST n] [BESTEFFORT] [DETAIL]
--   EVALSHA <sha> <numkeys> <key> [key ...] RL.CHECKALL <limiter> [limiter ...] [COST n] [DETAIL]
--
-- Options: COST n, PEEK, BESTEFFORT, DETAIL (the detailed reply, RESP2 form).
--
-- ARGV[1] is the command, the rest its arguments after the key(s), exactly as the module takes
-- them. The reply is the module's limiter reply: {granted, limit, remaining, retry_after_ms,
-- reset_after_ms}. Time is the server's clock (TIME, in µs); the arithmetic is the module's
-- (src/core), in integers: every value the script computes with is a whole number below 2^53,
-- which a Lua number holds exactly. Parameters are bounded so that this holds (README, "The
-- script backend"); beyond the bounds the script replies an error naming the module.
--
-- One key per limiter, a plain string (never the module's data type): `rl1 <algorithm> <last
-- update µs> <fields...>`, decimal integers separated by spaces (README, "Key layout"). Every
-- write sets the key's absolute expiry (SET ... PXAT) to the moment the limiter is fresh again,
-- as the module does. Writes are replicated as their effects (one SET with PXAT: the resolved
-- time, so replicas and the AOF hold exactly the master's value and expiry).

-- Set to true only by the differential tests: then `AT t` is accepted, as the module accepts it.
local TEST_CLOCK = false

if redis.replicate_commands then
  pcall(redis.replicate_commands)
end

local TWO52 = 4503599627370496
local TWO53 = 9007199254740992
-- The largest count or duration (µs) the script takes: 2^50 (35 years in µs).
local MAX_VALUE = 1125899906842624

-- Errors are raised as plain strings (level 0: no position) and replied as they are.
local function err(msg)
  return msg
end

local function error0(msg)
  error(msg, 0)
end

local MODULE_ONLY = ' needs the redis-ratelimit module (loadmodule libredis_ratelimit.so); ' ..
  'the script backend does not support it'
local MODULE_ONLY_PLURAL = ' need the redis-ratelimit module (loadmodule libredis_ratelimit.so); ' ..
  'the script backend does not support them'

-- Exact integer arithmetic on doubles -------------------------------------------------------

-- floor(a / b) and a mod b, for integers 0 <= a < 2^53, 0 < b < 2^53.
local function divmod(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  while r < 0 do
    q = q - 1
    r = r + b
  end
  while r >= b do
    q = q + 1
    r = r - b
  end
  return q, r
end

local function ceildiv(a, b)
  local q, r = divmod(a, b)
  if r > 0 then
    q = q + 1
  end
  return q
end

-- q, r with a * b = q * c + r, 0 <= r < c, for integers 0 <= a, b < 2^53, 0 < c < 2^52,
-- when q < 2^53 (the caller ensures it). Long multiplication, one bit of b at a time, keeping
-- every partial sum below 2c.
local function muldiv(a, b, c)
  local p = a * b
  if p < TWO52 then
    return divmod(p, c)
  end
  local qa, ra = divmod(a, c)
  local q = qa * b
  local bits = {}
  local n = b
  while n > 0 do
    local h, bit = divmod(n, 2)
    bits[#bits + 1] = bit
    n = h
  end
  local q2, r2 = 0, 0
  for i = #bits, 1, -1 do
    q2 = q2 * 2
    r2 = r2 * 2
    if r2 >= c then
      r2 = r2 - c
      q2 = q2 + 1
    end
    if bits[i] == 1 then
      r2 = r2 + ra
      if r2 >= c then
        r2 = r2 - c
        q2 = q2 + 1
      end
    end
  end
  return q + q2, r2
end

local function fmt(n)
  return string.format('%.0f', n)
end

local function ceil_ms(us)
  return ceildiv(us, 1000)
end

-- Arguments ----------------------------------------------------------------------------------

local function quote(s)
  s = tostring(s)
  if #s > 64 then
    s = string.sub(s, 1, 64)
  end
  return (string.gsub(s, '[^\32-\126]', function(c)
    return string.format('\\x%02x', string.byte(c))
  end))
end

-- A decimal integer of at most 19 digits, or nil; `big` is true when it is above MAX_VALUE.
local function parse_uint(s)
  if type(s) ~= 'string' or not string.find(s, '^%d+$') or #s > 19 then
    return nil
  end
  local v = tonumber(s)
  if #s > 16 or v > MAX_VALUE then
    return v, true
  end
  return v, false
end

local BEYOND = ' with the script backend (at most 1125899906842624); larger values' .. MODULE_ONLY_PLURAL

local function positive(s, what)
  local v, big = parse_uint(s)
  if v == nil or v < 1 or v > 9223372036854775807 then
    error0(err('ERR ' .. what .. ' must be a positive integer'))
  end
  if big then
    error0(err('ERR ' .. what .. ' must be at most 1125899906842624' .. BEYOND))
  end
  return v
end

local function non_negative(s, what)
  local v, big = parse_uint(s)
  if v == nil or v > 9223372036854775807 then
    error0(err('ERR ' .. what .. ' must be a non-negative integer'))
  end
  if big then
    error0(err('ERR ' .. what .. ' must be at most 1125899906842624' .. BEYOND))
  end
  return v
end

local UNITS = { [''] = 1, ms = 1, s = 1000, m = 60000, h = 3600000, d = 86400000 }

-- A duration (`1500`, `1500ms`, `30s`, `1m`, `24h`, `1d`) in µs; `min` is 1, or 0 for OFFSET.
local function duration(s, what, min)
  local invalid = 'ERR invalid duration \'' .. quote(s) .. '\' for ' .. what
  if type(s) ~= 'string' then
    error0(err(invalid))
  end
  local digits, unit = string.match(s, '^(%d+)(%a*)$')
  local per = digits and UNITS[string.lower(unit)]
  if not per or #digits > 19 then
    local calendar = string.lower(s)
    if what == 'window' and (calendar == 'day' or calendar == 'week' or calendar == 'month'
        or calendar == 'quarter' or calendar == 'year') then
      error0(err('ERR calendar windows' .. MODULE_ONLY_PLURAL))
    end
    error0(err(invalid))
  end
  local n = tonumber(digits)
  if n < min or n * per * 1000 > 9223372036854775807 then
    error0(err(invalid))
  end
  local us = n * per * 1000
  if us > MAX_VALUE then
    error0(err('ERR ' .. what .. ' must be at most 1125899906842 ms' .. BEYOND))
  end
  return us
end

-- An AT time (test mode only): Unix ms with an optional fraction, in µs.
local function at_time(s)
  local whole, frac = string.match(s, '^(%d+)%.?(%d*)$')
  if not whole or #whole > 15 or (frac == '' and string.find(s, '%.')) then
    error0(err('ERR invalid time \'' .. quote(s) .. '\' for AT, expected unix milliseconds'))
  end
  local us = tonumber(whole) * 1000
  local f = string.sub(frac .. '000', 1, 3)
  return us + tonumber(f)
end

-- The server's clock in µs (exact: about 2^50.6 in 2026, below 2^53 until the year 2255).
local function server_time()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Options of every limiter command; module-only options are refused by name.
local MODULE_OPTIONS = {
  DEDUP = true, HOLD = true, DELAY = true, SHADOW = true, BLOCK = true,
  TZ = true, ANCHOR = true, PRECISION = true, POLICY = true, WAIT = true, ID = true,
}

local function parse_option(opts, args, i)
  local name = string.upper(args[i])
  if name == 'COST' then
    if args[i + 1] == nil then
      error0(err('ERR syntax error, COST needs a value'))
    end
    opts.cost = non_negative(args[i + 1], 'COST')
    return i + 2
  elseif name == 'PEEK' then
    opts.peek = true
    return i + 1
  elseif name == 'BESTEFFORT' then
    opts.best_effort = true
    return i + 1
  elseif name == 'DETAIL' then
    opts.detail = true
    return i + 1
  elseif name == 'AT' then
    if not TEST_CLOCK then
      error0(err('ERR AT' .. MODULE_ONLY .. ' (scripts use the server\'s clock)'))
    end
    if args[i + 1] == nil then
      error0(err('ERR syntax error, AT needs a value'))
    end
    opts.at = at_time(args[i + 1])
    return i + 2
  elseif MODULE_OPTIONS[name] then
    error0(err('ERR ' .. name .. MODULE_ONLY))
  end
  error0(err('ERR unknown option \'' .. quote(args[i]) .. '\''))
end

-- Algorithms ---------------------------------------------------------------------------------
--
-- Each algorithm has: fields (the state's fields, in the stored order), parse (positional arguments and own
-- options), evaluate(state, params, now, cost, best_effort) -> verdict, commit(state, params,
-- now, granted) -> new state, fresh_at(state). A verdict is {granted, limit, remaining, retry,
-- reset} with retry nil (granted in full), -1 (never) or µs, reset in µs. `state` is nil for a
-- missing key.

local function grant(cost, avail, best_effort)
  if cost <= avail then
    return cost
  elseif best_effort then
    return avail
  end
  return 0
end

-- GCRA and the token bucket: the module's schedule. The TAT is kept as whole µs `tu` and a
-- remainder `tr` in ticks of 1/rate µs (TAT = tu + tr/rate, 0 <= tr < rate), so the module's
-- tick arithmetic is exact without products of Unix time and rate.
local function schedule_params(args, i, names)
  if args[i + 2] == nil then
    return nil
  end
  local p = {
    burst = positive(args[i], names[1]),
    rate = positive(args[i + 1], names[2]),
    period = duration(args[i + 2], 'period', 1),
  }
  -- burst * period (the window in ticks) below 2^53: every tick count of the state fits.
  if p.burst * p.period >= TWO53 then
    error0(err('ERR ' .. names[1] .. ' * period must be below 2^53 us with the script backend;' ..
      ' larger limits' .. MODULE_ONLY_PLURAL))
  end
  return p, i + 3
end

local function same_schedule(s, p)
  return s.burst == p.burst and s.rate == p.rate and s.period == p.period
end

local function too_large()
  error0(err('ERR this parameter change' .. MODULE_ONLY .. ' (its state does not fit 2^53)'))
end

-- ceil(x * num / den) (up) or floor (down), x * num / den below 2^52.
local function rescale(x, num, den, up)
  if x == 0 then
    return 0
  end
  if x * num / den >= TWO52 then
    too_large()
  end
  local q, r = muldiv(x, num, den)
  if up and r > 0 then
    q = q + 1
  end
  return q
end

-- The TAT under `p` at `now` as {tu, tr}, converting a state kept under other parameters as
-- the module does: `free` false keeps the backlog in units (GCRA), true the free tokens (token
-- bucket), both rounded against the client.
local function tat_under(s, p, now, free)
  if s == nil then
    return 0, 0
  end
  if same_schedule(s, p) then
    return s.tu, s.tr
  end
  -- The backlog in old ticks: TAT - now, 0 if the TAT is past.
  local backlog = 0
  if s.tu > now or (s.tu == now and s.tr > 0) then
    backlog = (s.tu - now) * s.rate + s.tr
  end
  local ticks
  if not free then
    ticks = rescale(backlog, p.period, s.period, true)
  else
    local old_window = s.burst * s.period
    local new_window = p.burst * p.period
    local debt, tokens = 0, 0
    if backlog > old_window then
      debt = rescale(backlog - old_window, p.period, s.period, true)
    else
      local left = old_window - backlog
      if left * p.period / s.period > new_window + 2 then
        tokens = new_window
      else
        tokens = math.min(rescale(left, p.period, s.period, false), new_window)
      end
    end
    ticks = new_window - tokens + debt
  end
  if ticks >= TWO53 then
    too_large()
  end
  local q, r = divmod(ticks, p.rate)
  return now + q, r
end

-- The TAT as {us, rem} plus n units of T (n * period ticks).
local function tat_plus(us, rem, n, p)
  if n == 0 then
    return us, rem
  end
  local q, r = muldiv(n, p.period, p.rate)
  local carry, rest = divmod(rem + r, p.rate)
  return us + q + carry, rest
end

local function schedule_evaluate(free)
  return function(s, p, now, cost, best_effort)
    local tu, tr = tat_under(s, p, now, free)
    -- base = max(TAT, now); d = base - now in ticks (d_us * rate + d_rem).
    local base_us, base_rem = now, 0
    if tu > now or (tu == now and tr > 0) then
      base_us, base_rem = tu, tr
    end
    local d_us = base_us - now
    -- Units used: ceil(d / period); available: burst - used, at least 0.
    local used = 0
    if d_us > 0 or base_rem > 0 then
      local q, r = muldiv(d_us, p.rate, p.period)
      used = q + ceildiv(r + base_rem, p.period)
    end
    local avail = math.max(p.burst - used, 0)
    local granted = grant(cost, avail, best_effort)
    local au, ar = tu, tr
    if granted > 0 then
      au, ar = tat_plus(base_us, base_rem, granted, p)
    end
    local reset = 0
    if au >= now then
      reset = au - now
      if ar > 0 then
        reset = reset + 1
      end
    end
    local retry
    if granted == cost then
      retry = nil
    elseif cost > p.burst then
      retry = -1
    elseif au < now then
      retry = 0
    else
      -- Allowed once now reaches after + cost*T - burst*T.
      local q2, r2 = muldiv(p.burst - cost, p.period, p.rate)
      retry = au - now - q2
      if ar > r2 then
        retry = retry + 1
      end
      retry = math.max(retry, 0)
    end
    return {
      granted = granted, limit = p.burst, remaining = avail - granted, retry = retry,
      reset = reset, tu = au, tr = ar,
    }
  end
end

local function schedule_commit(s, p, now, granted, v)
  return { burst = p.burst, rate = p.rate, period = p.period, tu = v.tu, tr = v.tr }
end

local function schedule_fresh_at(s)
  if s.tr > 0 then
    return s.tu + 1
  end
  return s.tu
end

local SCHEDULE_FIELDS = { 'burst', 'rate', 'period', 'tu', 'tr' }

local ALGORITHMS = {}

ALGORITHMS.GCRA = {
  name = 'RL.GCRA', tag = 'gcra', fields = SCHEDULE_FIELDS,
  parse = function(args, i)
    return schedule_params(args, i, { 'burst', 'rate' })
  end,
  evaluate = schedule_evaluate(false),
  commit = schedule_commit,
  fresh_at = schedule_fresh_at,
  window = function(p)
    return ceildiv(p.burst * p.period, p.rate)
  end,
}

ALGORITHMS.TOKENBUCKET = {
  name = 'RL.TOKENBUCKET', tag = 'tokenbucket', fields = SCHEDULE_FIELDS,
  parse = function(args, i)
    return schedule_params(args, i, { 'capacity', 'refill' })
  end,
  evaluate = schedule_evaluate(true),
  commit = schedule_commit,
  fresh_at = schedule_fresh_at,
  window = function(p)
    return ceildiv(p.burst * p.period, p.rate)
  end,
}

-- FIXED: windows of `window` µs aligned to the epoch shifted by `offset` (reduced modulo the
-- window). State: the window's end `e` and its count `c`.
local function window_of(p)
  return p.window
end

ALGORITHMS.FIXED = {
  name = 'RL.FIXED', tag = 'fixed', fields = { 'limit', 'window', 'offset', 'e', 'c' },
  window = window_of,
  parse = function(args, i)
    if args[i + 1] == nil then
      return nil
    end
    local p = {
      limit = positive(args[i], 'limit'),
      window = duration(args[i + 1], 'window', 1),
      offset = 0,
    }
    i = i + 2
    while args[i] ~= nil and string.upper(args[i]) == 'OFFSET' do
      if args[i + 1] == nil then
        error0(err('ERR syntax error, OFFSET needs a value'))
      end
      p.offset = duration(args[i + 1], 'OFFSET', 0)
      i = i + 2
    end
    local _, r = divmod(p.offset, p.window)
    p.offset = r
    return p, i
  end,
  evaluate = function(s, p, now, cost, best_effort)
    -- The end of now's window: now + W - ((now - offset) mod W).
    local _, into = divmod(now, p.window)
    local _, shifted = divmod(into + p.window - p.offset, p.window)
    local e = now + p.window - shifted
    local used = 0
    if s ~= nil and s.window == p.window and s.offset == p.offset and s.e == e then
      used = s.c
    end
    local to_end = e - now
    local avail = math.max(p.limit - used, 0)
    local granted = grant(cost, avail, best_effort)
    local retry
    if granted == cost then
      retry = nil
    elseif cost > p.limit then
      retry = -1
    else
      retry = to_end
    end
    local after = used + granted
    local reset = to_end
    if after == 0 then
      reset = 0
    end
    return {
      granted = granted, limit = p.limit, remaining = avail - granted, retry = retry,
      reset = reset, e = e, c = after,
    }
  end,
  commit = function(s, p, now, granted, v)
    return { limit = p.limit, window = p.window, offset = p.offset, e = v.e, c = v.c }
  end,
  fresh_at = function(s)
    if s.c == 0 then
      return 0
    end
    return s.e
  end,
}

-- SLIDINGCOUNTER: two epoch-aligned windows, E = p * (W - e) / W + c, in integers.
local function sc_view(s, p, now)
  local _, elapsed = divmod(now, p.window)
  local start = now - elapsed
  local prev, cur = 0, 0
  if s ~= nil and s.window == p.window then
    if s.s == start then
      prev, cur = s.p, s.c
    elseif s.s + p.window == start then
      prev, cur = s.c, 0
    end
  end
  return start, elapsed, prev, cur
end

-- floor(L - E) at 0 or above: L - c - ceil(p * (W - e) / W).
local function sc_free(p, elapsed, prev, cur)
  local decayed = ceildiv(prev * (p.window - elapsed), p.window)
  return math.max(p.limit - cur - decayed, 0)
end

-- ceil(x * W / y) when it is below W, else nil (x, y > 0).
local function sc_at(x, w, y)
  if x >= y then
    return nil
  end
  local q, r = muldiv(x, w, y)
  if r > 0 then
    q = q + 1
  end
  if q < w then
    return q
  end
  return nil
end

ALGORITHMS.SLIDINGCOUNTER = {
  name = 'RL.SLIDINGCOUNTER', tag = 'slidingcounter', fields = { 'limit', 'window', 's', 'p', 'c' },
  window = window_of,
  parse = function(args, i)
    if args[i + 1] == nil then
      return nil
    end
    local p = {
      limit = positive(args[i], 'limit'),
      window = duration(args[i + 1], 'window', 1),
    }
    if p.limit * p.window >= TWO53 then
      error0(err('ERR limit * window must be below 2^53 us with the script backend;' ..
        ' larger limits' .. MODULE_ONLY_PLURAL))
    end
    return p, i + 2
  end,
  evaluate = function(s, p, now, cost, best_effort)
    local start, elapsed, prev, cur = sc_view(s, p, now)
    local avail = sc_free(p, elapsed, prev, cur)
    local granted = grant(cost, avail, best_effort)
    local c = cur + granted
    local w = p.window
    local retry
    if granted == cost then
      retry = nil
    elseif cost > p.limit then
      retry = -1
    else
      -- 1. Later in this window, as the previous window's weight decays.
      local at = nil
      local excess = math.max(prev + c + cost - p.limit, 0)
      if prev > 0 then
        if excess == 0 then
          at = 0
        else
          at = sc_at(excess, w, prev)
        end
      end
      if at ~= nil then
        retry = math.max(at - elapsed, 0)
      else
        -- 2. In the next window, where this window's count decays in turn.
        local excess2 = math.max(c + cost - p.limit, 0)
        local into = 0
        if excess2 > 0 then
          into = sc_at(excess2, w, c) or w
        end
        retry = w - elapsed + into
      end
    end
    local reset = 0
    if c > 0 then
      reset = 2 * w - elapsed
    elseif prev > 0 then
      reset = w - elapsed
    end
    return {
      granted = granted, limit = p.limit, remaining = sc_free(p, elapsed, prev, c), retry = retry,
      reset = reset, s = start, p = prev, c = c,
    }
  end,
  commit = function(s, p, now, granted, v)
    return { limit = p.limit, window = p.window, s = v.s, p = v.p, c = v.c }
  end,
  fresh_at = function(s)
    if s.c > 0 then
      return s.s + 2 * s.window
    elseif s.p > 0 then
      return s.s + s.window
    end
    return 0
  end,
}

local NOT_IN_SCRIPTS = {
  LEAKYBUCKET = true, SLIDING = true, CONCURRENCY = true, STREAMCOUNT = true,
}

-- Keys ---------------------------------------------------------------------------------------

-- The key's state for `algo` (nil when missing) and its last update (0 when missing).
local function load(key, algo)
  local v = redis.call('GET', key)
  if not v then
    return nil, 0
  end
  local tag, rest = string.match(v, '^rl1 (%a+) ([%d ]+)$')
  if not tag then
    error0(err('WRONGTYPE key \'' .. quote(key) .. '\' holds a string that is not a limiter of ' ..
      'the script backend'))
  end
  if tag ~= algo.tag then
    local held = tag
    for _, a in pairs(ALGORITHMS) do
      if a.tag == tag then
        held = a.name
      end
    end
    error0(err('WRONGTYPE key \'' .. quote(key) .. '\' holds a ' .. held .. ' limiter, not ' ..
      algo.name))
  end
  local s, lu, i = {}, nil, 0
  local fields = algo.fields
  for n in string.gmatch(rest, '%d+') do
    if i == 0 then
      lu = tonumber(n)
    else
      local f = fields[i]
      if f == nil then
        i = -1
        break
      end
      s[f] = tonumber(n)
    end
    i = i + 1
  end
  if i ~= #fields + 1 then
    error0(err('ERR key \'' .. quote(key) .. '\' holds a broken limiter of the script backend'))
  end
  return s, lu
end

-- The state as one string, `rl1 <algorithm> <last update> <fields...>` (decimal integers), with
-- its absolute expiry: SET ... PXAT.
local function store(key, algo, s, now)
  local parts = { 'rl1', algo.tag, fmt(now) }
  for _, f in ipairs(algo.fields) do
    parts[#parts + 1] = fmt(s[f])
  end
  redis.call('SET', key, table.concat(parts, ' '), 'PXAT',
    fmt(ceil_ms(math.max(algo.fresh_at(s), now))))
end

local function retry_ms(retry)
  if retry == -1 then
    return -1
  elseif retry ~= nil then
    return ceil_ms(retry)
  end
  return 0
end

local function reply(v)
  return { v.granted, v.limit, v.remaining, retry_ms(v.retry), ceil_ms(v.reset) }
end

-- Why one limiter denied a call of `cost` it granted `granted` of: nil when it did not.
local function reason_of(cost, v)
  if cost > 0 and v.granted == 0 then
    if v.retry == -1 then
      return 'never'
    end
    return 'limit'
  end
  return nil
end

-- The detailed reply (DETAIL): the five fields, denied_by, reason, and one entry per limiter
-- {name, key, cost, granted, limit, remaining, retry_after_ms, reset_after_ms, window_ms, policy}.
local function detailed(v, entries)
  local reason, denied_by = 'granted', false
  for _, want in ipairs({ 'never', 'limit' }) do
    for _, e in ipairs(entries) do
      if e.reason == want then
        reason, denied_by = want, e.name
        break
      end
    end
    if denied_by then
      break
    end
  end
  local list = {}
  for _, e in ipairs(entries) do
    list[#list + 1] = {
      e.name, e.key, e.cost, e.granted, e.v.limit, e.v.remaining, retry_ms(e.v.retry),
      ceil_ms(e.v.reset), ceil_ms(e.window), false,
    }
  end
  local out = reply(v)
  out[6] = denied_by
  out[7] = reason
  out[8] = list
  return out
end

-- Commands -----------------------------------------------------------------------------------

local function run_single(algo, p, args, i, opts)
  while args[i] ~= nil do
    i = parse_option(opts, args, i)
  end
  local key = KEYS[1]
  local s, lu = load(key, algo)
  local now = math.max(opts.at or server_time(), lu)
  local v = algo.evaluate(s, p, now, opts.cost, opts.best_effort)
  if v.granted > 0 and not opts.peek then
    store(key, algo, algo.commit(s, p, now, v.granted, v), now)
  end
  if opts.detail then
    return detailed(v, { {
      name = opts.name or key, key = key, cost = opts.cost, granted = v.granted, v = v,
      window = algo.window(p), reason = reason_of(opts.cost, v),
    } })
  end
  return reply(v)
end

local function single(algo, args)
  local p, i = algo.parse(args, 2)
  if p == nil then
    error0(err('ERR wrong number of arguments for \'' .. string.lower(algo.name) .. '\' command'))
  end
  return run_single(algo, p, args, i, { cost = 1 })
end

-- One limiter as RL.ALL writes it: an algorithm, its positional arguments and own options
-- (OFFSET, CHARGE, NAME). The limiter and the index after it.
local function parse_limiter(args, i)
  local name = string.upper(args[i])
  local algo = ALGORITHMS[name]
  if algo == nil then
    if NOT_IN_SCRIPTS[name] then
      error0(err('ERR ' .. name .. MODULE_ONLY))
    end
    error0(err('ERR unknown limiter \'' .. quote(args[i]) .. '\''))
  end
  local p, j = algo.parse(args, i + 1)
  if p == nil then
    error0(err('ERR syntax error, ' .. name .. ' needs its positional arguments'))
  end
  local l = { algo = algo, p = p }
  while args[j] ~= nil do
    local o = string.upper(args[j])
    if o == 'CHARGE' then
      if args[j + 1] == nil then
        error0(err('ERR syntax error, CHARGE needs a value'))
      end
      l.charge = non_negative(args[j + 1], 'CHARGE')
      j = j + 2
    elseif o == 'NAME' then
      if args[j + 1] == nil then
        error0(err('ERR syntax error, NAME needs a value'))
      end
      local nm = args[j + 1]
      if #nm < 1 or #nm > 64 or not string.find(nm, '^[%w_%-%.:]+$') then
        error0(err('ERR NAME must be 1-64 of letters, digits, _ - . :'))
      end
      l.name = nm
      j = j + 2
    elseif o == 'TZ' or o == 'ANCHOR' or o == 'PRECISION' then
      error0(err('ERR ' .. o .. MODULE_ONLY))
    else
      break
    end
  end
  return l, j
end

local function all(args, peek)
  local n = #KEYS
  if n < 1 then
    error0(err('ERR numkeys must be a positive integer'))
  end
  for a = 1, n do
    for b = a + 1, n do
      if KEYS[a] == KEYS[b] then
        error0(err('ERR syntax error, RL.ALL keys must be distinct'))
      end
    end
  end
  local i = 2
  if args[i] ~= nil and string.upper(args[i]) == 'POLICY' then
    error0(err('ERR POLICY' .. MODULE_ONLY))
  end
  local limiters = {}
  for k = 1, n do
    if args[i] == nil then
      error0(err('ERR syntax error, a limiter is missing for a key'))
    end
    limiters[k], i = parse_limiter(args, i)
  end
  local opts = { cost = 1 }
  while args[i] ~= nil do
    i = parse_option(opts, args, i)
  end
  opts.peek = opts.peek or peek
  local unequal = false
  for _, l in ipairs(limiters) do
    l.cost = l.charge or opts.cost
    if l.cost ~= opts.cost then
      unequal = true
    end
  end
  if opts.best_effort and unequal then
    error0(err('ERR BESTEFFORT does not apply to a CHARGE other than COST'))
  end
  -- Judge every key before any changes.
  local t = opts.at or server_time()
  for k, l in ipairs(limiters) do
    l.s, l.lu = load(KEYS[k], l.algo)
    l.now = math.max(t, l.lu)
    l.v = l.algo.evaluate(l.s, l.p, l.now, l.cost, opts.best_effort)
  end
  local granted, amounts = 0, {}
  if opts.best_effort then
    local least = nil
    for _, l in ipairs(limiters) do
      if least == nil or l.v.granted < least then
        least = l.v.granted
      end
    end
    granted = least
    for k = 1, n do
      amounts[k] = least
    end
  else
    local ok = true
    for _, l in ipairs(limiters) do
      if l.v.granted ~= l.cost then
        ok = false
      end
    end
    for k, l in ipairs(limiters) do
      amounts[k] = ok and l.cost or 0
    end
    if ok then
      granted = opts.cost
    end
  end
  -- Charge every key its amount (on a copy when peeking), then read each key's reply from its
  -- state after: cost 0, with the retry of its full cost.
  local verdicts = {}
  for k, l in ipairs(limiters) do
    local s = l.s
    local amount = amounts[k]
    if amount > 0 then
      local charged = l.v
      if amount ~= l.v.granted then
        charged = l.algo.evaluate(l.s, l.p, l.now, amount, false)
      end
      s = l.algo.commit(l.s, l.p, l.now, amount, charged)
      if not opts.peek then
        store(KEYS[k], l.algo, s, l.now)
      end
    end
    local current = l.algo.evaluate(s, l.p, l.now, 0, false)
    local retry
    if amount > 0 and amount == l.cost then
      retry = l.v.retry
    else
      local full = l.algo.evaluate(s, l.p, l.now, l.cost, false)
      if full.granted == l.cost then
        retry = nil
      else
        retry = full.retry
      end
    end
    current.retry = retry
    verdicts[k] = current
  end
  -- The limiter that allows the fewest more calls of this shape, then the fewest remaining,
  -- then the first; the largest retry (never if any is never) and reset.
  local best, best_key = nil, nil
  local retry, reset = nil, 0
  for k, v in ipairs(verdicts) do
    local c = limiters[k].cost
    local calls = 0
    if c > 0 then
      calls = divmod(v.remaining, c)
    end
    local key = { c == 0 and 1 or 0, calls, v.remaining }
    if best == nil or key[1] < best_key[1] or (key[1] == best_key[1] and (key[2] < best_key[2] or
        (key[2] == best_key[2] and key[3] < best_key[3]))) then
      best, best_key = v, key
    end
    if v.retry == -1 or retry == -1 then
      retry = -1
    elseif v.retry ~= nil then
      retry = math.max(retry or 0, v.retry)
    end
    reset = math.max(reset, v.reset)
  end
  local v = {
    granted = granted, limit = best.limit, remaining = best.remaining, retry = retry,
    reset = reset,
  }
  if opts.detail then
    local entries = {}
    for k, l in ipairs(limiters) do
      entries[k] = {
        name = l.name or KEYS[k], key = KEYS[k], cost = l.cost, granted = amounts[k],
        v = verdicts[k], window = l.algo.window(l.p), reason = reason_of(l.cost, l.v),
      }
    end
    return detailed(v, entries)
  end
  return reply(v)
end

local function main()
  local args = ARGV
  if args[1] == nil then
    error0(err('ERR the first argument must be the command (RL.GCRA, RL.TOKENBUCKET, RL.FIXED, ' ..
      'RL.SLIDINGCOUNTER, RL.ALL, RL.CHECK or RL.CHECKALL)'))
  end
  local cmd = string.upper(args[1])
  if string.sub(cmd, 1, 3) == 'RL.' then
    cmd = string.sub(cmd, 4)
  end
  if cmd == 'ALL' or cmd == 'CHECKALL' then
    return all(args, cmd == 'CHECKALL')
  end
  if cmd == 'CHECK' then
    -- RL.CHECK key limiter [COST n] [BESTEFFORT] [DETAIL]: the reply of the call with PEEK.
    if #KEYS ~= 1 then
      error0(err('ERR RL.CHECK takes exactly one key'))
    end
    if args[2] == nil then
      error0(err('ERR wrong number of arguments for \'rl.check\' command'))
    end
    local l, i = parse_limiter(args, 2)
    return run_single(l.algo, l.p, args, i, { cost = 1, peek = true, name = l.name })
  end
  local algo = ALGORITHMS[cmd]
  if algo == nil then
    error0(err('ERR RL.' .. cmd .. MODULE_ONLY))
  end
  if #KEYS ~= 1 then
    error0(err('ERR RL.' .. cmd .. ' takes exactly one key'))
  end
  return single(algo, args)
end

local ok, result = pcall(main)
if ok then
  return result
end
if type(result) == 'table' and result.err then
  return result
end
return redis.error_reply(tostring(result))
