-- enter: join the line (or the pre-queue before a scheduled opening, or be
-- admitted at once while the room is idle), or report the place/token the
-- user already has.
-- KEYS[1] waiting  KEYS[2] seq  KEYS[3] token:<uid>  KEYS[4] status:<uid>
-- KEYS[5] active  KEYS[6] config  KEYS[7] stats
-- KEYS[8] guard (HASH: client address → its budget `tokens|at`, and
--   GF_POW .. challenge → the used solution's expiry ms)
-- KEYS[9] pre  KEYS[10] draw
-- KEYS[11] groups (pre-queued identities per address group: draw rounds)
-- KEYS[12] claims (visitors passed over asleep: user → ticket)
-- ARGV[1] uid  ARGV[2] key base '<prefix>:{<queue>}:' (for the seen bitmaps)
-- ARGV[3] the client address group ('' no budget)
-- ARGV[4] a verified proof-of-work solution's challenge ('' none)
-- ARGV[5] its expiry ms
-- ARGV[6] a check a new place lacks, as the stats counter of its refusals
--   (SF_REFUSED_CHALLENGE or SF_REFUSED_TURNSTILE; '' none): the edge
--   verified what it was sent, the script knows whether it is needed
-- ARGV[7] a fresh entry token, used only if idle passthrough admits at once
-- ARGV[8] the verified solution's difficulty level ('' none): below the
--   level in force for this size, it is stale
-- ARGV[9] ARGV[10] an IPv6 address group's /56 and /48 ('' for IPv4): the
--   entry budget, the cap on live places and a pre-queued identity's draw
--   round count them too (prelude budget_spend and draw_slot)
-- Reply: a waiting_reply, pre_queue_reply or settled_state reply (see
--   prelude; 'admitted' also for a visitor idle passthrough just admitted),
--   or {'full', waiting, max_waiting} · {'closed', state} (also after
--   closes_at) · {'sold_out'} (the queue keeps a stock and no unit is
--   left: no new place; one held already is kept, and its reply carries
--   the units left) · UNCONFIGURED (no scheduler has published settings yet;
--   nothing written) · {'guard', missing} · {'too_many', retry_after_ms} ·
--   {'reused'} (a solution used before) · {'stale'} (a solution of a lower
--   difficulty level than the one now in force) · {'address_full', cap}
--   (the address group, its /56 or its /48 holds as many live places as
--   entry_places_per_address allows it). A refusal of a new place writes
--   only its stats counter (and at the cap, once a second, the hold that
--   spares the next refusals the count).
-- A refresh never moves anyone: a waiting user keeps their ticket, a
-- pre-queued one their draw, one holding a claim takes it up (back in line
-- first on its own ticket, prelude reclaim), and a visitor who holds a place passes no
-- guard and spends no budget. The size check and the ZADD run in one
-- script, so the limit holds under any race.
local uid, base = ARGV[1], ARGV[2]
-- The budget's and passthrough's settings come with the rest of the
-- config: one HMGET.
local cfg = read_config(KEYS[6], CF_ENTRY_BUDGET_PER_MINUTE, CF_ENTRY_BUDGET_BURST,
  CF_IDLE_PASSTHROUGH, CF_MAX_ACTIVE, CF_TOKEN_TTL_MS, CF_RATE_NOW, CF_TICK_MS,
  CF_ENTRY_PLACES_PER_ADDRESS, CF_CHALLENGE_CROWD)
local now = now_ms()

local ticket = redis.call('ZSCORE', KEYS[1], uid)
if ticket then
  ticket = tonumber(ticket)
  if cfg[CF_ABANDON_AFTER_MS] then mark_seen(base, now, ticket, seen.live(cfg, now)) end
  return line_reply(KEYS[1], uid, ticket, cfg, now)
end
ticket = reclaim({claims = KEYS[12], waiting = KEYS[1], status = KEYS[4], stats = KEYS[7]}, base, uid, now, cfg)
if ticket then return line_reply(KEYS[1], uid, ticket, cfg, now) end
local left = drawing_left(cfg)
local slot, sealed = redis.call('ZSCORE', KEYS[9], uid), false
if not slot and left > 0 then slot, sealed = redis.call('ZSCORE', KEYS[10], uid), true end
if slot then
  -- Revoked while pre-queued: the place stays (the pre-queue's indices
  -- must stay dense) but is never drawn.
  if settled_state(KEYS[3], KEYS[4])[REPLY_KIND] == R.REVOKED then return {R.REVOKED} end
  return pre_queue_reply(cfg, now, slot, draw_number(KEYS[6], sealed))
end

-- A revoked visitor stays out until the revocation expires or is lifted.
local current = settled_state(KEYS[3], KEYS[4])
local kind = current[REPLY_KIND]
if kind == R.ADMITTED or kind == R.IN_FLIGHT or kind == R.REVOKED then
  return current
end

local state = cfg[CF_STATE]
if not state or not cfg[CF_MAX_WAITING] or not cfg[CF_ABANDON_AFTER_MS] then
  return UNCONFIGURED
end
if state ~= QS_OPEN and state ~= QS_PAUSED then return {R.CLOSED, state} end
local closes_at = tonumber(cfg[CF_CLOSES_AT] or '')
if closes_at and now >= closes_at then return {R.CLOSED, QS_CLOSED} end
if stock.sold_out(cfg) then return {R.SOLD_OUT} end

-- Before the opening a new place joins the pre-queue. After it, the first
-- entry (or tick) seals a pre-queue still there, so this visitor's ticket
-- comes after the range reserved for it. A pre-queue of a later opening
-- that passed while an earlier draw still runs waits for that draw, and
-- takes newcomers until it is sealed.
local pre_queue = before_opening(cfg, now)
local pre_exists = redis.call('EXISTS', KEYS[9]) == 1
if not pre_queue and pre_exists then
  if left == 0 then
    left = seal(KEYS[9], KEYS[10], KEYS[2], KEYS[6], KEYS[11], KEYS[1], base .. K_MEMBERS,
      base .. K_DRAW_MEMBERS, base .. K_MOVED, base .. K_DRAW_MOVED)
    pre_exists = false
  else
    pre_queue = true
  end
end
local size = redis.call('ZCARD', KEYS[1]) + left
if pre_exists then size = size + redis.call('ZCARD', KEYS[9]) end
local max = tonumber(cfg[CF_MAX_WAITING])
if size >= max then return {R.FULL, size, max} end
-- The entry guard: only a new place pays. Checks first, writes after.
if ARGV[6] ~= '' then
  redis.call('HINCRBY', KEYS[7], ARGV[6], 1)
  return {R.GUARD, ARGV[6]}
end
-- The level in force for this size, as the challenge script gave it
-- (challenge_crowd: max_waiting before that setting existed).
if ARGV[8] ~= '' then
  local level = challenge_level(size, tonumber(cfg[CF_CHALLENGE_CROWD] or '') or max)
  if tonumber(ARGV[8]) < level then
    redis.call('HINCRBY', KEYS[7], SF_REFUSED_STALE, 1)
    return {R.STALE}
  end
end
-- The address's buckets, the solution's single-use mark and the cap's
-- holds share one hash: one read for them all, one write for the budget
-- and the mark. An IPv6 group also spends its /56's and /48's buckets
-- (prelude budget_spend).
local per_minute = tonumber(cfg[CF_ENTRY_BUDGET_PER_MINUTE] or '0')
local address = ARGV[3] ~= '' and per_minute > 0 and ARGV[3] or nil
local wide = ARGV[9] ~= ''
local pow_field = ARGV[4] ~= '' and GF_POW .. ARGV[4] or nil
local cap = tonumber(cfg[CF_ENTRY_PLACES_PER_ADDRESS] or '0')
-- The levels the cap counts: the group, then its /56 and /48.
local levels = {}
if cap > 0 and ARGV[3] ~= '' then
  levels = {{name = ARGV[3], limit = cap}}
  if wide then
    levels = {levels[#levels], {name = ARGV[9], limit = cap * PER_56}, {name = ARGV[10], limit = cap * PER_48}}
  end
end
local fields = {}
if address then fields = wide and {address, ARGV[9], ARGV[10]} or {address} end
local buckets = #fields
for _, level in ipairs(levels) do fields[#fields + 1] = GF_FULL .. level.name end
if pow_field then fields[#fields + 1] = pow_field end
local got = #fields > 0 and redis.call('HMGET', KEYS[8], unpack(fields)) or {}
local spent
if address then
  local per_ms = per_minute / 60000
  local retry
  spent, retry = budget_spend(got, buckets, now, per_ms, tonumber(cfg[CF_ENTRY_BUDGET_BURST] or '0'))
  if not spent then
    redis.call('HINCRBY', KEYS[7], SF_REFUSED_BUDGET, 1)
    return {R.TOO_MANY, retry}
  end
end
-- A solution is good once, until it expires.
if pow_field and (tonumber(ARGV[5]) <= now or got[#fields]) then
  redis.call('HINCRBY', KEYS[7], SF_REFUSED_REUSED, 1)
  return {R.REUSED}
end
-- The cap on live places: an address group holds at most `cap`, its /56
-- cap * PER_56 and its /48 cap * PER_48 (one /64's places are a 16th of
-- its /48's at most). Each level's set `places:<name>` holds the places
-- taken from it; a member is live while still pre-queued, being drawn,
-- waiting or holding a claim. A set is counted (O(its size)) only when it
-- holds as many members as its limit, and a level found full is refused
-- for FULL_HOLD_MS without counting again, so knocking at the cap costs
-- one count a second.
local function live(m)
  return redis.call('ZSCORE', KEYS[1], m) or redis.call('ZSCORE', KEYS[9], m)
    or (left > 0 and redis.call('ZSCORE', KEYS[10], m)) or redis.call('ZSCORE', KEYS[12], m)
end
for i, level in ipairs(levels) do
  local hold = tonumber(got[buckets + i] or '')
  level.key, level.ended = base .. K_PLACES .. level.name, {}
  local full = hold and hold > now
  if not full and redis.call('SCARD', level.key) >= level.limit then
    local count = 0
    for _, m in ipairs(redis.call('SMEMBERS', level.key)) do
      if m ~= uid and live(m) then
        count = count + 1
      else
        level.ended[#level.ended + 1] = m
      end
    end
    if count >= level.limit then
      full = true
      redis.call('HSET', KEYS[8], GF_FULL .. level.name, now + FULL_HOLD_MS)
    end
  end
  if full then
    redis.call('HINCRBY', KEYS[7], SF_REFUSED_ADDRESS_FULL, 1)
    return {R.ADDRESS_FULL, level.limit}
  end
end
if address or pow_field then
  local writes = {}
  for i = 1, buckets do
    writes[#writes + 1] = fields[i]
    writes[#writes + 1] = spent[i]
  end
  if pow_field then
    writes[#writes + 1] = pow_field
    writes[#writes + 1] = ARGV[5]
  end
  redis.call('HSET', KEYS[8], unpack(writes))
end

-- A rejoin ends the previous entry: an issued token that lapsed before the
-- sweep saw it still holds a slot; free it and count it as expired.
if redis.call('ZREM', KEYS[5], uid) == 1 then
  redis.call('HINCRBY', KEYS[7], SF_EXPIRED, 1)
end
redis.call('DEL', KEYS[3], KEYS[4])

-- The place joins its levels' sets (after idle passthrough, which takes
-- no place).
local function count_place()
  for _, level in ipairs(levels) do
    if #level.ended > 0 then redis.call('SREM', level.key, unpack(level.ended)) end
    redis.call('SADD', level.key, uid)
    redis.call('PEXPIRE', level.key, PLACES_KEEP_MS)
  end
end

if pre_queue then
  -- Ranked for the draw by its address group's round, then by arrival.
  -- Not marked seen: a pre-queue is far back, where nobody is dropped for
  -- silence (the grace starts when the draw places it).
  local score = draw_slot(KEYS[11], base .. K_MEMBERS, base .. K_MOVED, uid, ARGV[3], ARGV[9],
    ARGV[10])
  redis.call('ZADD', KEYS[9], score, uid)
  -- The first of an empty room wakes an idle lease holder.
  if size == 0 then
    redis.call('LPUSH', base .. K_WAKE, 1)
    redis.call('LTRIM', base .. K_WAKE, 0, 0)
  end
  count_place()
  redis.call('HINCRBY', KEYS[7], SF_ENTERED, 1)
  return pre_queue_reply(cfg, now, score, draw_number(KEYS[6], false))
end

-- Idle passthrough: nobody waits (size counts the line, a draw and a
-- pre-queue), a slot is free and the shared rate bucket holds a token:
-- admitted now, active at once.
if size == 0 and state == QS_OPEN and cfg[CF_IDLE_PASSTHROUGH] == 'true' and ARGV[7] ~= ''
  and cfg[CF_MAX_ACTIVE] and cfg[CF_TOKEN_TTL_MS] and cfg[CF_TICK_MS] and cfg[CF_STATUS_TTL_MS]
  and stock.room(KEYS[6], KEYS[5], base .. K_STOCK_HELD) >= 1 then
  if not pass_admit(KEYS[5], KEYS[7], now, cfg[CF_MAX_ACTIVE], cfg[CF_RATE_NOW], cfg[CF_ADMIT_RATE_PER_SECOND],
    cfg[CF_TICK_MS]) then
    local expires = now + tonumber(cfg[CF_TOKEN_TTL_MS])
    redis.call('SET', KEYS[3], token_record(ARGV[7], now, expires, 0), 'PX', expires - now)
    set_status(KEYS[4], uid, ST_ISSUED, now, tonumber(cfg[CF_STATUS_TTL_MS]))
    redis.call('ZADD', KEYS[5], expires, uid)
    return admitted_reply(ARGV[7], now, expires)
  end
end

local new_ticket = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], new_ticket, uid)
if size == 0 then
  redis.call('LPUSH', base .. K_WAKE, 1)
  redis.call('LTRIM', base .. K_WAKE, 0, 0)
end
count_place()
mark_seen(base, now, new_ticket, seen.live(cfg, now))
redis.call('HINCRBY', KEYS[7], SF_ENTERED, 1)
return waiting_reply(size + 1, cfg, new_ticket)
