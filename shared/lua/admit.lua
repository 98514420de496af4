-- admit: one scheduler tick for one queue, atomically.
-- KEYS[1] waiting  KEYS[2] active  KEYS[3] lock  KEYS[4] config  KEYS[5] stats
-- KEYS[6] guard (entry budgets and used solutions)  KEYS[7] pre (counted)
-- KEYS[8] claims (visitors passed over asleep: user → ticket)
-- KEYS[9] stock_held (units held by orders in flight: user → units)
-- ARGV: positions AA.* (shared/src/records.rs admit_arg): the lease owner id, the
--   key base, the allowance (most admissions this tick), the settings it
--   needs, the measured rate ('' keeps the recorded one), the lease TTL
--   (the owner's lease is extended by it: a tick is one round trip), the
--   admissions per second in force (AA.RATE: the shared rate bucket, see
--   prelude, refills at it and it is recorded as rate_now for idle
--   passthrough), the near zone's and exact head's sizes
--   (docs/uncapped-line.md), the idle lease TTL ('' none: a tick that
--   leaves the queue idle extends the lease by it instead, so the holder
--   may wait for a wake-up; docs/scheduler.md, *An idle room*), then from
--   AA.GRANTS pairs of token and activation jitter ms, one per possible
--   admission.
-- Reply: positions AR.* (shared/src/records.rs admit_reply): the code, this tick's
--   counts, the totals of refused entries and of the operators' bypasses
--   and revocations, the pre-queued, the run-time settings' version (0
--   none; the caller applies a new one), the visitors passed over into
--   claims this tick and the claims held, and a kept stock's units left
--   (-1: none kept), units sold and overbooking margin in force (per
--   mille).
--   code 1 admitted (maybe 0 users) · 2 queue not admitting (paused/closed;
--   sweeps still ran) · 3 a draw runs (no admission until it is over) · 0
--   caller does not own the lease: nothing changed.
-- Safety never depends on the lock alone: free slots are computed here, so
-- two schedulers running at once cannot over-admit, and a stale owner is
-- fenced off by the owner check.
if redis.call('GET', KEYS[3]) ~= ARGV[AA.OWNER] then
  local r = {}
  for i = 1, AR.LEN do r[i] = 0 end
  return r
end
redis.call('PEXPIRE', KEYS[3], ARGV[AA.LEASE_TTL_MS])

local base = ARGV[AA.BASE]
local allowance = tonumber(ARGV[AA.ALLOWANCE])
local max_active = tonumber(ARGV[AA.MAX_ACTIVE])
local token_ttl = tonumber(ARGV[AA.TOKEN_TTL_MS])
local status_ttl = tonumber(ARGV[AA.STATUS_TTL_MS])
local limit = tonumber(ARGV[AA.SWEEP_LIMIT])
local scan = tonumber(ARGV[AA.LEAVER_SCAN])
local rate, tick_ms = tonumber(ARGV[AA.RATE]), tonumber(ARGV[AA.TICK_MS])
local zone = math.max(1, tonumber(ARGV[AA.NEAR_ZONE]))
local now = now_ms()
-- Alive: polled within abandon_after (admitted at the head). Asleep:
-- polled within the sleep grace (kept; passed over at the head). The
-- windows are the published ones, as the edge's scripts read them (with
-- any earlier ones a change keeps in force), not this caller's: a holder
-- applying new settings admits before it publishes them. The caller's
-- serve only a queue with none published.
local live = read_fields(KEYS[4], CF_ABANDON_AFTER_MS, CF_SLEEP_GRACE_MS, CF_SEEN_PREV, CF_GRACE_PREV)
if not live[CF_ABANDON_AFTER_MS] then
  live[CF_ABANDON_AFTER_MS], live[CF_SLEEP_GRACE_MS] = ARGV[AA.ABANDON_AFTER_MS], ARGV[AA.SLEEP_GRACE_MS]
end
live = seen.live(live, now)
local alive, asleep = seen.alive(base, now, live), seen.asleep(base, now, live)
local token_base, status_base = base .. K_TOKEN, base .. K_STATUS

local function abandon(uid)
  set_status(status_base .. uid, uid, ST_ABANDONED, now, status_ttl)
end

-- 1. Free the slots whose time is up. An unused token is expired; a consume
--    whose origin never settled has lapsed (a late settle still counts it).
local expired, lapsed = 0, 0
do
  local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, limit)
  for _, uid in ipairs(gone) do
    local status_key = status_base .. uid
    local kind = redis.call('GET', status_key)
    kind = kind and split(kind)[SR_KIND]
    if kind == ST_IN_FLIGHT then
      lapsed = lapsed + 1
      -- Its unit goes back to the stock; a late settle that says the order
      -- went through takes it again (prelude stock.settle).
      stock.settle(KEYS[4], KEYS[9], uid, 0)
    else
      expired = expired + 1
      -- An unused turn ends its session with it.
      redis.call('DEL', token_base .. uid, base .. K_SESSION .. uid)
      -- A revocation (of a visitor in flight: its slot is left to run out)
      -- stays what the visitor is told.
      if kind and kind ~= ST_REVOKED then set_status(status_key, uid, ST_EXPIRED, now, nil) end
    end
  end
  if #gone > 0 then redis.call('ZREM', KEYS[2], unpack(gone)) end
end

-- 2. The near zone: its front moves to the ticket at rank `zone` and never
--    back. Every visitor it passes was far back, maybe silent for long: it
--    is marked seen now (at most sweep_limit a tick), a grace of
--    abandon_after in which to poll (and of the sleep grace before it is
--    dropped). In a line shorter than the zone the
--    front is the last ticket, and the visitors it passes are new (seen
--    at their enter): no grace. Only near visitors must keep polling.
local front = tonumber(redis.call('HGET', KEYS[4], CF_ZONE_FRONT) or '0')
do
  local at = redis.call('ZRANGE', KEYS[1], zone - 1, zone - 1, 'WITHSCORES')
  if #at > 0 and tonumber(at[2]) > front then
    local passed = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. front, at[2], 'WITHSCORES', 'LIMIT', 0, limit)
    for i = 2, #passed, 2 do
      mark_seen(base, now, tonumber(passed[i]), live)
    end
    if #passed >= 2 * limit then front = tonumber(passed[#passed]) else front = tonumber(at[2]) end
  elseif #at == 0 then
    local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
    if #last > 0 and tonumber(last[2]) > front then front = tonumber(last[2]) end
  end
end

-- 3. A rolling scan drops leavers in the near zone (silent past the sleep
--    grace), so positions and the size limit count visitors who may still
--    come back; the cursor wraps at the zone's front. (A pre-queue is far
--    back: nobody leaves it for silence.) A second one drops the claims
--    whose grace is over (at least CLAIM_SCAN a tick: claims need it even
--    with the line's scan off).
local abandoned = 0
if scan > 0 then
  local cursor = redis.call('HGET', KEYS[5], SF_SCAN_CURSOR) or '0'
  local batch = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. cursor, front, 'WITHSCORES', 'LIMIT', 0, scan)
  local dead = {}
  for i = 1, #batch, 2 do
    local ticket = tonumber(batch[i + 1])
    if not alive(ticket) and not asleep(ticket) then
      dead[#dead + 1] = batch[i]
      abandon(batch[i])
    end
  end
  if #dead > 0 then redis.call('ZREM', KEYS[1], unpack(dead)) end
  abandoned = #dead
  local next_cursor = '0'
  if #batch >= 2 * scan then next_cursor = batch[#batch] end
  redis.call('HSET', KEYS[5], SF_SCAN_CURSOR, next_cursor)
end
do
  local CLAIM_SCAN = 10
  local cursor = redis.call('HGET', KEYS[5], SF_CLAIM_CURSOR) or '0'
  local batch = redis.call('ZRANGEBYSCORE', KEYS[8], '(' .. cursor, '+inf', 'WITHSCORES', 'LIMIT', 0,
    math.max(scan, CLAIM_SCAN))
  local over = {}
  for i = 1, #batch, 2 do
    if not asleep(tonumber(batch[i + 1])) then
      over[#over + 1] = batch[i]
      abandon(batch[i])
    end
  end
  if #over > 0 then redis.call('ZREM', KEYS[8], unpack(over)) end
  abandoned = abandoned + #over
  local next_cursor = '0'
  if #batch >= 2 * math.max(scan, CLAIM_SCAN) then next_cursor = batch[#batch] end
  if next_cursor ~= cursor then redis.call('HSET', KEYS[5], SF_CLAIM_CURSOR, next_cursor) end
end

-- 4. Admit from the head up to the free slots and the allowance, one token
--    per user. Silent visitors met at the head are never admitted: asleep
--    (within the sleep grace) they are passed over into a claim, taking no
--    slot and no rate token, otherwise dropped. A tick pops at most
--    sweep_limit + allowance users.
--    Nobody is admitted while a draw places the pre-queue: its visitors
--    come before everyone behind them. The rate bucket shared with idle
--    passthrough is the rate limit (the scheduler asks for what it can
--    hold at most); the allowance only caps a caller's tick.
local code, admitted, claimed = 1, 0, 0
-- A kept stock lets out at most its units left times one plus the
-- overbooking margin, counting the turns out (prelude stock.tick).
local kept = {}
kept.left, kept.sold, kept.margin, kept.out = stock.tick(KEYS[4], KEYS[5], KEYS[2], KEYS[9])
local cfg = read_fields(KEYS[4], CF_STATE, CF_DRAW_LEFT, CF_RATE_NOW, CF_SETTINGS_VERSION, CF_SESSION_MS)
if cfg[CF_RATE_NOW] ~= ARGV[AA.RATE] then redis.call('HSET', KEYS[4], CF_RATE_NOW, ARGV[AA.RATE]) end
if (cfg[CF_STATE] == QS_OPEN or cfg[CF_STATE] == QS_DRAINING) and tonumber(cfg[CF_DRAW_LEFT] or '0') == 0 then
  local free = max_active - redis.call('ZCARD', KEYS[2])
  if kept.left >= 0 then
    free = math.min(free, math.floor(kept.left * (1000 + kept.margin) / 1000) - kept.out)
  end
  local tokens = rate_tokens(KEYS[5], now, rate, tick_ms)
  local want = math.min(free, allowance, math.floor(tokens), math.floor((#ARGV - AA.GRANTS + 1) / 2))
  local popped = 0
  while admitted < want and popped < limit do
    local batch = redis.call('ZPOPMIN', KEYS[1], want - admitted)
    if #batch == 0 then break end
    for i = 1, #batch, 2 do
      local uid, ticket = batch[i], tonumber(batch[i + 1])
      popped = popped + 1
      if alive(ticket) then
        local k = AA.GRANTS + 2 * admitted -- ARGV index of the next grant
        local activate = now + tonumber(ARGV[k + 1])
        local expires = activate + token_ttl
        redis.call('SET', token_base .. uid, token_record(ARGV[k], activate, expires, 0), 'PX', expires - now)
        -- The session opens with the turn (README, *Browse and spend
        -- routes*); token and slot last until the visitor comes.
        if cfg[CF_SESSION_MS] then
          set_session(base .. K_SESSION .. uid, activate, activate + math.max(token_ttl, tonumber(cfg[CF_SESSION_MS])),
            activate + SESSION_CAP_MS, 0, now)
        end
        set_status(status_base .. uid, uid, ST_ISSUED, now, status_ttl)
        redis.call('ZADD', KEYS[2], expires, uid)
        admitted = admitted + 1
      elseif asleep(ticket) then
        -- The claim's status outlives any grace the bitmaps can give.
        redis.call('ZADD', KEYS[8], ticket, uid)
        set_status(status_base .. uid, uid, ST_CLAIMED, now,
          status_ttl + math.ceil(math.max(tonumber(ARGV[AA.SLEEP_GRACE_MS]), unpack(live.asleep)) * 1.5))
        claimed = claimed + 1
      else
        abandon(uid)
        abandoned = abandoned + 1
      end
    end
  end
  spend_rate(KEYS[5], now, tokens, admitted)
elseif tonumber(cfg[CF_DRAW_LEFT] or '0') > 0 then
  code = 3
else
  code = 2
end

-- 5. Counters, the rate estimate the ETA uses, and the snapshot the edge
--    answers far-back visitors from (docs/uncapped-line.md).
if admitted > 0 then redis.call('HINCRBY', KEYS[5], SF_ADMITTED, admitted) end
if expired > 0 then redis.call('HINCRBY', KEYS[5], SF_EXPIRED, expired) end
if lapsed > 0 then redis.call('HINCRBY', KEYS[5], SF_LAPSED, lapsed) end
if abandoned > 0 then redis.call('HINCRBY', KEYS[5], SF_ABANDONED, abandoned) end
if ARGV[AA.MEASURED_RATE] ~= '' then redis.call('HSET', KEYS[4], CF_MEASURED_RATE, ARGV[AA.MEASURED_RATE]) end
local waiting = redis.call('ZCARD', KEYS[1])
-- (a block of its own: the script's locals stay within Lua's budget)
do
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  local near = redis.call('ZCOUNT', KEYS[1], '-inf', front)
  -- The exact head: the ticket at rank `head` (the last one in a shorter
  -- line); 0 without a head.
  local head = math.min(tonumber(ARGV[AA.EXACT_HEAD]), zone)
  local head_front, head_count = 0, 0
  if head > 0 and waiting > 0 then
    head_count = math.min(head, waiting)
    head_front = redis.call('ZRANGE', KEYS[1], head_count - 1, head_count - 1, 'WITHSCORES')[2]
  end
  redis.call('HSET', KEYS[4], CF_ZONE_FRONT, front, CF_ZONE_COUNT, near, CF_TAIL, last[2] or 0,
    CF_WAITING, waiting, CF_SNAP_AT, now, CF_HEAD_FRONT, head_front, CF_HEAD_COUNT, head_count)
  -- Once a second, marks of the rank-to-ticket map behind the head at ranks
  -- growing by a fifth from the head's (the zone's without a head;
  -- `rank:ticket,…`, at most MARKS): the edge interpolates between them, so
  -- gaps spread unevenly (a draw's leavers, near leavers not dropped yet)
  -- cost the estimate little.
  local MARKS = 64
  if now - tonumber(redis.call('HGET', KEYS[4], CF_MARKS_AT) or '0') >= 1000 then
    local marks, rank = {}, near
    if head_count > 0 then rank = head_count end
    while #marks < MARKS do
      rank = math.floor(rank * 1.2) + 1
      if rank >= waiting then break end
      local at_rank = redis.call('ZRANGE', KEYS[1], rank - 1, rank - 1, 'WITHSCORES')
      marks[#marks + 1] = rank .. ':' .. at_rank[2]
    end
    local listed = table.concat(marks, ',')
    redis.call('HSET', KEYS[4], CF_MARKS, listed, CF_MARKS_AT, now, CF_MARKS_SHIFT, 0)
  else
    -- In between, every tick: the visitors gone from ahead of the first
    -- mark since the marks were written (admitted, dropped), by which the
    -- edge moves every mark's rank on. Marks up to a second old would
    -- otherwise put everyone behind them that second's admissions too
    -- far back (one ZCOUNT instead of rewriting every mark).
    local first_rank, first_ticket = string.match(redis.call('HGET', KEYS[4], CF_MARKS) or '', '^(%d+):(%d+)')
    if first_rank then
      redis.call('HSET', KEYS[4], CF_MARKS_SHIFT,
        math.max(0, tonumber(first_rank) - redis.call('ZCOUNT', KEYS[1], '-inf', first_ticket)))
    end
  end
end

-- 6. Entry guard upkeep: a rolling scan of the guard hash deletes used
--    solutions and cap holds past their expiry and address budgets that
--    are full again
--    (or all of them when the budget is off), so it never grows for good.
if scan > 0 then
  local per_minute, burst = tonumber(ARGV[AA.BUDGET_PER_MINUTE]), tonumber(ARGV[AA.BUDGET_BURST])
  local per_ms = per_minute / 60000
  local cursor = redis.call('HGET', KEYS[5], SF_ADDR_CURSOR) or '0'
  local page = redis.call('HSCAN', KEYS[6], cursor, 'COUNT', scan)
  local done = {}
  for i = 1, #page[2], 2 do
    local field, value = page[2][i], page[2][i + 1]
    local spent
    if string.sub(field, 1, #GF_POW) == GF_POW or string.sub(field, 1, #GF_FULL) == GF_FULL then
      spent = tonumber(value) <= now
    else
      local k = budget_scale(field)
      spent = per_minute == 0 or budget_tokens(value, now, per_ms * k, burst * k) >= burst * k
    end
    if spent then done[#done + 1] = field end
  end
  if #done > 0 then redis.call('HDEL', KEYS[6], unpack(done)) end
  redis.call('HSET', KEYS[5], SF_ADDR_CURSOR, page[1])
end

-- 7. The edge's refusals, for the operator's metrics (totals; read here so
--    the tick stays one round trip).
-- The lease this tick leaves its holder goes with the snapshot: the edge
-- trusts no snapshot read later than that after it was written (its
-- writer has stopped ticking and lost the lease).
if ARGV[AA.IDLE_LEASE_TTL_MS] ~= '' and waiting == 0 and redis.call('ZCARD', KEYS[2]) == 0
  and redis.call('ZCARD', KEYS[7]) == 0 and tonumber(cfg[CF_DRAW_LEFT] or '0') == 0 then
  redis.call('PEXPIRE', KEYS[3], ARGV[AA.IDLE_LEASE_TTL_MS])
  redis.call('HSET', KEYS[4], CF_SNAP_TTL, ARGV[AA.IDLE_LEASE_TTL_MS])
else
  redis.call('HSET', KEYS[4], CF_SNAP_TTL, ARGV[AA.LEASE_TTL_MS])
end
local refused = read_fields(KEYS[5], SF_REFUSED_BUDGET, SF_REFUSED_CHALLENGE, SF_REFUSED_REUSED,
  SF_REFUSED_TURNSTILE, SF_REFUSED_STALE, SF_REFUSED_ADDRESS_FULL, SF_BYPASSED, SF_REVOKED)
local function total(field) return tonumber(refused[field] or '0') end
local r = {}
r[AR.CODE], r[AR.ADMITTED], r[AR.EXPIRED], r[AR.LAPSED], r[AR.ABANDONED], r[AR.WAITING] =
  code, admitted, expired, lapsed, abandoned, waiting
r[AR.ACTIVE], r[AR.PRE_QUEUED] = redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[7])
r[AR.REFUSED_BUDGET], r[AR.REFUSED_CHALLENGE], r[AR.REFUSED_REUSED], r[AR.REFUSED_TURNSTILE] =
  total(SF_REFUSED_BUDGET), total(SF_REFUSED_CHALLENGE), total(SF_REFUSED_REUSED), total(SF_REFUSED_TURNSTILE)
r[AR.REFUSED_STALE], r[AR.REFUSED_ADDRESS_FULL], r[AR.BYPASSED], r[AR.REVOKED] =
  total(SF_REFUSED_STALE), total(SF_REFUSED_ADDRESS_FULL), total(SF_BYPASSED), total(SF_REVOKED)
r[AR.SETTINGS_VERSION] = tonumber(cfg[CF_SETTINGS_VERSION] or '0')
r[AR.CLAIMED], r[AR.CLAIMS] = claimed, redis.call('ZCARD', KEYS[8])
r[AR.STOCK_LEFT], r[AR.STOCK_SOLD], r[AR.STOCK_MARGIN] = kept.left, kept.sold, kept.margin
return r
