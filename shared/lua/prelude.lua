-- prelude: helpers shared by the queue scripts (prepended to each, after
-- the generated names of shared/src/fields.rs, so every script stays one
-- self-contained EVAL).
--
-- Records are fields joined by SEP; their layouts (TR_*, SR_*) and the
-- status kinds (ST_*) are declared in shared/src/fields.rs.
-- Liveness: seen:<width>:<bucket>:<block> are bitmaps indexed by ticket,
-- one per time bucket of abandon_after/4 ms (see docs/engine.md).
-- All times are epoch milliseconds from Redis TIME: one clock for all.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function split(s)
  local out = {}
  for part in string.gmatch(s, '[^' .. SEP .. ']+') do out[#out + 1] = part end
  return out
end

local function record(...)
  return table.concat({...}, SEP)
end

-- A token record (TR_*): `token:<uid>`, and the tail of an IN_FLIGHT
-- status record.
local function token_record(token, activate_at, expires_at, restores)
  local f = {}
  f[TR_TOKEN], f[TR_ACTIVATE_AT], f[TR_EXPIRES_AT], f[TR_RESTORES] =
    token, activate_at, expires_at, restores
  return table.concat(f, SEP)
end

-- A session record (SN_*): `session:<uid>`, written with PX until its end.
local function set_session(key, activate_at, ends_at, cap_at, touched, now)
  local f = {}
  f[SN.ACTIVATE_AT], f[SN.ENDS_AT], f[SN.CAP_AT], f[SN.TOUCHED] = activate_at, ends_at, cap_at, touched
  redis.call('SET', key, table.concat(f, SEP), 'PX', math.max(1, ends_at - now))
end

-- The reply for a visitor holding an entry token (AD.*).
local function admitted_reply(token, activate_at, expires_at)
  local r = {}
  r[AD.KIND], r[AD.TOKEN], r[AD.ACTIVATE_AT], r[AD.EXPIRES_AT] =
    R.ADMITTED, token, activate_at, expires_at
  return r
end

-- Config as a table by field name (cfg[CF_STATE]; false for a field that
-- is not set): never by position, so the order a script asks in is no
-- contract. read_config reads CFG_READ (shared/src/records.rs: the fields
-- the helpers below need) and any more a script names, in one HMGET.
local function by_name(fields, values)
  local cfg = {}
  for i = 1, #fields do cfg[fields[i]] = values[i] end
  return cfg
end

-- Fields of any hash by name, in one HMGET.
local function read_fields(key, ...)
  return by_name({...}, redis.call('HMGET', key, ...))
end

local function read_config(config_key, ...)
  local fields = {...}
  for i = 1, #CFG_READ do fields[#fields + 1] = CFG_READ[i] end
  return by_name(fields, redis.call('HMGET', config_key, unpack(fields)))
end

-- The published settings a script cannot work without (by name, as
-- read_config), or nil when any is missing (no scheduler has published
-- them). Every script then answers UNCONFIGURED and changes nothing: there
-- are no defaults in Lua.
local UNCONFIGURED = {R.UNCONFIGURED}
local function required_config(config_key, ...)
  local fields = {...}
  local values = redis.call('HMGET', config_key, ...)
  for i = 1, #fields do
    if not values[i] then return nil end
  end
  return by_name(fields, values)
end

-- The proof-of-work difficulty level in force for `size` places against
-- the queue's challenge_crowd: the number of CHALLENGE_LEVELS thresholds
-- (from n/d of the crowd; shared/src/guard LEVEL_FROM) it reached.
local function challenge_level(size, crowd)
  crowd = math.max(1, crowd)
  local level = 0
  for i = 1, #CHALLENGE_LEVELS do
    local from = CHALLENGE_LEVELS[i]
    if size * from.d < crowd * from.n then break end
    level = i
  end
  return level
end

-- Seen bitmaps: a poll sets the ticket's bit in the current bucket; a
-- ticket counts as seen while its bit is set in one of the last
-- seen.BUCKETS + 1 buckets, so within a window w it is found between 1x
-- and 1.25x w after its last poll. Two families: `seen:` (buckets of
-- abandon_after/4) tells who is alive (admitted at the head), `grace:`
-- (buckets of sleep_grace/4) who is asleep within their sleep grace (kept
-- in line; passed over at the head into a claim). With no grace (sleep
-- grace at most abandon_after) only `seen:` is kept.
-- A bitmap's name holds its bucket width, `seen:<width>:<bucket>:<block>`,
-- so a new window never renumbers the old one's buckets: after a change
-- the earlier windows stay in force for a while (`seen_prev`,
-- `grace_prev`, written by configure), and a poll is marked, and a ticket
-- found, in each window in force (docs/engine.md, *Changing the windows*).
-- (One table for their helpers: a Lua local less in every script.)
local seen = {BUCKETS = 4, BLOCK = 1048576} -- BLOCK: tickets per bitmap, at most 128 KiB

function seen.width(window)
  return math.max(1, math.ceil(window / seen.BUCKETS))
end

function seen.key(base, family, width, bucket, ticket)
  return base .. family .. width .. ':' .. bucket .. ':' .. math.floor(ticket / seen.BLOCK)
end

-- The windows of one family in force at `now`: `window` (nil: none) and
-- the earlier ones `prev` (`window|until,…`) keeps until their `until`,
-- each once.
function seen.windows(window, prev, now)
  local list, have = {}, {}
  if window then list[#list + 1], have[window] = window, true end
  for w, till in string.gmatch(prev or '', '(%d+)' .. SEP .. '(%d+)') do
    w = tonumber(w)
    if tonumber(till) > now and not have[w] then list[#list + 1], have[w] = w, true end
  end
  return list
end

-- The grace in force for a config (by name): sleep_grace_ms when above
-- abandon_after_ms, else nil (none).
function seen.grace(cfg)
  local abandon, grace = tonumber(cfg[CF_ABANDON_AFTER_MS] or ''), tonumber(cfg[CF_SLEEP_GRACE_MS] or '')
  if abandon and grace and grace > abandon then return grace end
  return nil
end

-- The windows in force for a config read by name (CFG_READ has the
-- fields): `alive` those of `seen:`, `asleep` those of `grace:`.
function seen.live(cfg, now)
  return {
    alive = seen.windows(tonumber(cfg[CF_ABANDON_AFTER_MS] or ''), cfg[CF_SEEN_PREV], now),
    asleep = seen.windows(seen.grace(cfg), cfg[CF_GRACE_PREV], now),
  }
end

function seen.mark(base, family, now, ticket, windows)
  for _, window in ipairs(windows) do
    local width = seen.width(window)
    local key = seen.key(base, family, width, math.floor(now / width), ticket)
    if redis.call('SETBIT', key, ticket % seen.BLOCK, 1) == 0 then
      redis.call('PEXPIRE', key, width * (seen.BUCKETS + 2))
    end
  end
end

-- A test for many tickets at one moment (admit scans hundreds per tick),
-- with the bitmap key names built once per block, newest first: seen
-- within one of `windows` in `family` (none: never).
function seen.checker(base, family, now, windows)
  local names = {}
  return function(ticket)
    local block = math.floor(ticket / seen.BLOCK)
    local keys = names[block]
    if not keys then
      keys = {}
      for _, window in ipairs(windows) do
        local width = seen.width(window)
        local bucket = math.floor(now / width)
        for i = 0, seen.BUCKETS do keys[#keys + 1] = seen.key(base, family, width, bucket - i, ticket) end
      end
      names[block] = keys
    end
    local bit = ticket % seen.BLOCK
    for i = 1, #keys do
      if redis.call('GETBIT', keys[i], bit) == 1 then return true end
    end
    return false
  end
end

-- The alive and asleep tests under `live` (seen.live).
function seen.alive(base, now, live)
  return seen.checker(base, K_SEEN, now, live.alive)
end

function seen.asleep(base, now, live)
  return seen.checker(base, K_GRACE, now, live.asleep)
end

-- A poll (or a grace given): marked in both families, in every window in
-- force.
local function mark_seen(base, now, ticket, live)
  seen.mark(base, K_SEEN, now, ticket, live.alive)
  seen.mark(base, K_GRACE, now, ticket, live.asleep)
end

-- Entry budgets: a token bucket per client address of `burst` places
-- refilled at `per_ms`, kept as tokens|at in one hash per queue (no key per
-- address to create and expire on the hot path; the admit tick deletes the
-- buckets that are full again). BUDGET_RECORD reads one without a table;
-- budget_tokens gives the tokens a bucket holds at `now`.
local BUDGET_RECORD = '^([^' .. SEP .. ']+)' .. SEP .. '(.+)$'
local function budget_tokens(rec, now, per_ms, burst)
  if not rec then return burst end
  local tokens, at = string.match(rec, BUDGET_RECORD)
  return math.min(burst, tonumber(tokens) + (now - tonumber(at)) * per_ms)
end

-- Status changes: set_status writes a user's status record (`kind|now|...`,
-- living px ms, or keeping its TTL when px is nil) and appends `kind|now`
-- to history:<uid>, the newest 16 changes (HISTORY_KEEP), living as long as the
-- record. The history never holds a token. Its key is derived from the
-- status key (`<base>status:<uid>`), in the same hash slot.
local function set_status(status_key, uid, kind, now, px, ...)
  local rec = record(kind, now, ...)
  if px then
    redis.call('SET', status_key, rec, 'PX', px)
  else
    redis.call('SET', status_key, rec, 'KEEPTTL')
    px = math.max(1, redis.call('PTTL', status_key))
  end
  local history = string.sub(status_key, 1, #status_key - #uid - #K_STATUS) .. K_HISTORY .. uid
  redis.call('RPUSH', history, kind .. SEP .. now)
  redis.call('LTRIM', history, -16, -1) -- fields.rs HISTORY_KEEP (a test checks)
  redis.call('PEXPIRE', history, px)
end

-- The state of a user who is not in the waiting set: an admitted reply
-- (AD.*) or {kind}.
local function settled_state(token_key, status_key)
  local tok = redis.call('GET', token_key)
  if tok then
    local f = split(tok)
    return admitted_reply(f[TR_TOKEN], f[TR_ACTIVATE_AT], f[TR_EXPIRES_AT])
  end
  local st = redis.call('GET', status_key)
  if not st then return {R.NOT_IN_QUEUE} end
  local kind = split(st)[SR_KIND]
  if kind == ST_IN_FLIGHT then return {R.IN_FLIGHT} end
  if kind == ST_ORDERED then return {R.ORDERED} end
  if kind == ST_ABANDONED then return {R.ABANDONED} end
  if kind == ST_REVOKED then return {R.REVOKED} end
  -- EXPIRED, or ISSUED whose token has lapsed before the sweep saw it.
  return {R.EXPIRED}
end

-- The reply for a visitor in line (WR.*; the ticket: the edge signs it
-- into the visitor's place cookie).
local function waiting_reply(position, cfg, ticket)
  local r = {}
  r[WR.KIND], r[WR.POSITION], r[WR.STATE], r[WR.MEASURED_RATE] =
    R.WAITING, position, cfg[CF_STATE] or '', cfg[CF_MEASURED_RATE] or ''
  r[WR.ADMIT_RATE], r[WR.POLL_MIN_MS], r[WR.POLL_MAX_MS], r[WR.TICKET] =
    cfg[CF_ADMIT_RATE_PER_SECOND] or '', cfg[CF_POLL_MIN_MS] or '', cfg[CF_POLL_MAX_MS] or '', ticket
  return r
end

-- Drop day (docs/drop-day.md). Before a scheduled opening new places go to
-- the pre-queue `pre` (user → pre-ticket, taken from the same counter as
-- tickets so the seen bitmaps stay dense). After the opening the first
-- script that sees it seals `pre` into `draw` and reserves the tickets
-- right behind everyone already in line; the scheduler then places the
-- sealed visitors on those tickets in a random order (draw_place), and
-- whoever arrives later takes a ticket behind the reserved range.
local function before_opening(cfg, now)
  local opens_at = tonumber(cfg[CF_OPENS_AT] or '')
  return opens_at ~= nil and now < opens_at
end

local function drawing_left(cfg)
  return tonumber(cfg[CF_DRAW_LEFT] or '0')
end

-- A pre-queued visitor's score is (round - 1) * ROUND_SPAN + index, its
-- 1-based arrival index in its round (fields.rs DRAW_ROUND_SPAN): its slot
-- in the draw's permutation, which the edge can evaluate from the slot
-- signed into its cookie (shared/src/draw.rs). Nobody leaves a pre-queue
-- for silence (liveness is checked once a visitor nears the head), so the
-- indices stay dense: the k-th visitor of a round is at index k.
-- The draw slot of a new pre-queued identity from address group `group`
-- (and, for IPv6, its /56 and /48, '' for IPv4): its round is its group's
-- count of pre-queued identities with this one, a /56 counted as at most
-- PER_56 addresses and a /48 as at most PER_48 ('' no address: round 1);
-- its index the round's size with it (the `groups` hash keeps each round's
-- size as field GR_ROUND .. round; no address group starts with it).
-- Returns the score.
local function draw_slot(groups_key, group, net56, net48)
  local round = 1
  if group ~= '' then
    round = redis.call('HINCRBY', groups_key, group, 1)
    if net56 ~= '' then
      round = math.max(round, math.ceil(redis.call('HINCRBY', groups_key, net56, 1) / PER_56),
        math.ceil(redis.call('HINCRBY', groups_key, net48, 1) / PER_48))
    end
    -- Beyond 2^20 rounds one group's later identities share the last one
    -- (the score stays exact below 2^53).
    round = math.min(round, MAX_ROUND)
  end
  local index = redis.call('HINCRBY', groups_key, GR_ROUND .. round, 1)
  return (round - 1) * ROUND_SPAN + index
end

-- The sizes of a sealed draw's rounds, in round order from round 1, the
-- empty ones as 0 (a round's position in the list is its number): the
-- counts `enter` kept, read with one HMGET per 1,000 rounds up to the last
-- visitor's. Counts that do not add up to `n` (a pre-queue some older
-- version wrote) give '' instead: one round, ranked by score, which the
-- scheduler can still draw but whose slots no cookie may name.
local function round_sizes(groups_key, draw_key, n)
  local top = redis.call('ZRANGE', draw_key, -1, -1, 'WITHSCORES')
  local last = math.floor(tonumber(top[2]) / ROUND_SPAN) + 1
  local sizes, total = {}, 0
  for from = 1, last, 1000 do
    local fields = {}
    for r = from, math.min(from + 999, last) do fields[#fields + 1] = GR_ROUND .. r end
    for _, v in ipairs(redis.call('HMGET', groups_key, unpack(fields))) do
      local size = tonumber(v or '0') or 0
      sizes[#sizes + 1] = size
      total = total + size
    end
  end
  if total == n then return table.concat(sizes, ',') end
  return ''
end

-- Seals the pre-queue: RENAME, INCRBY, and the rounds' sizes for the
-- permutation. Returns how many visitors the draw places. Only called
-- once the opening has passed, no draw runs and `pre` exists. The group
-- counts start again for the next pre-queue. Also kept for the edge: the
-- draw's number (draw_number counts the seals: a slot is signed with the
-- number its pre-queue gets, so it never reads another draw) and the
-- visitors in line ahead of the reserved range (draw_ahead).
local function seal(pre_key, draw_key, seq_key, config_key, groups_key, waiting_key)
  local n = redis.call('ZCARD', pre_key)
  if n == 0 then return 0 end
  redis.call('RENAME', pre_key, draw_key)
  local rounds = round_sizes(groups_key, draw_key, n)
  redis.call('UNLINK', groups_key)
  local last = redis.call('INCRBY', seq_key, n)
  redis.call('HINCRBY', config_key, CF_DRAW_NUMBER, 1)
  redis.call('HSET', config_key, CF_DRAW_BASE, last - n, CF_DRAW_END, last, CF_DRAW_LEFT, n,
    CF_DRAW_DONE, 0, CF_DRAW_ROUNDS, rounds, CF_DRAW_AHEAD, redis.call('ZCARD', waiting_key))
  redis.call('HDEL', config_key, CF_DRAW_SEED)
  return n
end

-- The reply for a visitor before the draw placed it (PR.*): no position
-- exists yet. The slot and draw number are '' for a drawn visitor already
-- on its ticket while the draw runs.
local function pre_queue_reply(cfg, now, slot, number)
  local r = {}
  r[PR.KIND], r[PR.OPENS_AT], r[PR.NOW], r[PR.POLL_MIN_MS], r[PR.POLL_MAX_MS] =
    R.PRE_QUEUE, cfg[CF_OPENS_AT] or '', now, cfg[CF_POLL_MIN_MS] or '', cfg[CF_POLL_MAX_MS] or ''
  r[PR.OPENING_SPREAD_MS], r[PR.ABANDON_AFTER_MS], r[PR.SLOT], r[PR.DRAW_NUMBER] =
    cfg[CF_OPENING_SPREAD_MS] or '', cfg[CF_ABANDON_AFTER_MS] or '', slot or '', number or ''
  return r
end

-- The number of the draw a pre-queued visitor's slot belongs to: the last
-- sealed one for a visitor of `draw` (sealed), the next one for `pre`.
local function draw_number(config_key, sealed)
  local n = tonumber(redis.call('HGET', config_key, CF_DRAW_NUMBER) or '0')
  if sealed then return n end
  return n + 1
end

-- The reply for a user in the line. While a draw runs, a drawn user has no
-- final place yet, and everyone behind the reserved range also waits
-- behind the draw's unplaced visitors.
local function line_reply(waiting_key, uid, ticket, cfg, now)
  local left = drawing_left(cfg)
  local position = redis.call('ZRANK', waiting_key, uid) + 1
  if left > 0 then
    if ticket > tonumber(cfg[CF_DRAW_END]) then
      position = position + left
    elseif ticket > tonumber(cfg[CF_DRAW_BASE]) then
      return pre_queue_reply(cfg, now)
    end
  end
  return waiting_reply(position, cfg, ticket)
end

-- Sleep grace (docs/engine.md): a visitor asleep when its turn came holds
-- a claim, `claims` user → its ticket. Back while still within its grace
-- it takes that ticket again: every ticket in line is younger, so it is
-- first (with any other returner, by ticket) and the next tick admits it,
-- within the free slots and the rate. A claim past its grace met here is
-- dropped as abandoned, as the admit tick's sweep would. `cfg` is the
-- config read by name (read_config: the liveness windows, and
-- status_ttl_ms, the RETURNED record's life). Returns the ticket, or nil
-- when the visitor holds no live claim.
-- A return to an empty line wakes an idle lease holder, which ticks only
-- when woken.
local function reclaim(keys, base, uid, now, cfg)
  local ticket = redis.call('ZSCORE', keys.claims, uid)
  if not ticket then return nil end
  ticket = tonumber(ticket)
  redis.call('ZREM', keys.claims, uid)
  local live = seen.live(cfg, now)
  if not (cfg[CF_ABANDON_AFTER_MS] and seen.asleep(base, now, live)(ticket)) then
    set_status(keys.status, uid, ST_ABANDONED, now, nil)
    redis.call('HINCRBY', keys.stats, SF_ABANDONED, 1)
    return nil
  end
  redis.call('ZADD', keys.waiting, ticket, uid)
  set_status(keys.status, uid, ST_RETURNED, now, tonumber(cfg[CF_STATUS_TTL_MS] or ''))
  mark_seen(base, now, ticket, live)
  if redis.call('ZCARD', keys.waiting) == 1 then
    redis.call('LPUSH', base .. K_WAKE, 1)
    redis.call('LTRIM', base .. K_WAKE, 0, 0)
  end
  return ticket
end

-- The admission rate the scheduler's ticks and idle passthrough share, as
-- a token bucket `tokens|at` in the stats hash: the one limiter of
-- admissions, refilled at `rate` per second and holding at most
-- RATE_BUCKET_TICKS ticks' worth, at least one (shared/src/ops/admit.rs
-- rate_bucket_cap, whose result each tick asks for). Fractions carry.
-- Returns the tokens it holds at `now`.
local function rate_tokens(stats_key, now, rate, tick_ms)
  local cap = math.max(1, RATE_BUCKET_TICKS * rate * tick_ms / 1000)
  return budget_tokens(redis.call('HGET', stats_key, SF_RATE_BUCKET), now, rate / 1000, cap)
end

local function spend_rate(stats_key, now, tokens, spent)
  redis.call('HSET', stats_key, SF_RATE_BUCKET, (tokens - spent) .. SEP .. now)
end

-- Idle passthrough's admission, shared by enter and pass: a free slot and
-- a token of the shared rate (at rate_now, else the configured rate).
-- Spends the token and counts the admission, or returns why not (R.FULL,
-- R.RATE) with nothing written. The caller takes the slot.
local function pass_admit(active_key, stats_key, now, max_active, rate_now, rate, tick_ms)
  if redis.call('ZCARD', active_key) >= tonumber(max_active) then return R.FULL end
  local tokens = rate_tokens(stats_key, now, tonumber(rate_now or '') or tonumber(rate), tonumber(tick_ms))
  if tokens < 1 then return R.RATE end
  spend_rate(stats_key, now, tokens, 1)
  redis.call('HINCRBY', stats_key, SF_ADMITTED, 1)
  redis.call('HINCRBY', stats_key, SF_PASSED, 1)
  return nil
end

