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

-- Entry budgets are kept for an address group and, for IPv6, for its /56
-- and its /48 too, each of those PER_56 / PER_48 times an address's (rate
-- and burst): a /48 takes at most as many places as PER_48 addresses do,
-- and one /64 can spend at most 1/PER_48 of its /48's. `recs` are the
-- buckets' records in that order (n is 1 or 3). Returns the records to
-- write once the place is taken, or nil and the ms until every bucket
-- holds a token again.
local BUDGET_SCALES = {1, PER_56, PER_48}
local function budget_spend(recs, n, now, per_ms, burst)
  local out, wait = {}, 0
  for i = 1, n do
    local k = BUDGET_SCALES[i]
    local tokens = budget_tokens(recs[i], now, per_ms * k, burst * k)
    if tokens < 1 then wait = math.max(wait, math.ceil((1 - tokens) / (per_ms * k))) end
    out[i] = (tokens - 1) .. SEP .. now
  end
  if wait > 0 then return nil, wait end
  return out
end

-- How many addresses' worth a guard hash bucket holds (the admit tick's
-- upkeep): a /56's PER_56, a /48's PER_48, an address group's one.
local function budget_scale(field)
  local tail = string.sub(field, -3)
  if tail == '/56' then return PER_56 end
  if tail == '/48' then return PER_48 end
  return 1
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
  r[WR.STOCK_LEFT] = cfg[STOCK.LEFT] or ''
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
--
-- Rounds (docs/drop-day.md, *Address groups*): an address group (an IPv4
-- address, an IPv6 /64) has one place a round, its identities in rounds
-- that only go up. An IPv6 /64 also starts behind the /64s its /56 and
-- /48 already brought: the n-th distinct /64 of a /56 starts no earlier
-- than round ceil(n / PER_56), of a /48 no earlier than ceil(n / PER_48),
-- and so is every later identity of a /64 (the counts as they stand
-- then). Distinct /64s are counted, not identities, so one /64's volume
-- moves back only that /64.
--
-- `groups` keeps, per address group, `round|score|uid`: its last round,
-- and while it has one identity that identity's score and id; from its
-- second identity on, just the round, and every identity of the group is
-- in `members` (uid -> `score|group`), which the scheduler reads after
-- the seal to deal each group's seats among its identities at random
-- (scheduler/src/draw.rs): their arrival order decides nothing. The
-- /56 and /48 counts are fields of `groups` too, and GR_ROUND .. round
-- each round's size (no address group starts with it).
-- `moved` lists the round-1 seats (0-based indices, `i,`) whose group has
-- more than one identity, so may be dealt to another: the edge answers
-- every other round-1 slot of a dealt draw from its snapshot
-- (shared/src/draw.rs MovedSeats). A group's round-1 seat is always its
-- first identity's.
local GROUP_RECORD = '^(%d+)' .. SEP .. '?(%d*)' .. SEP .. '?(.*)$'

-- The draw slot of new pre-queued identity `uid` from address group
-- `group` ('' no address: round 1), for IPv6 with its /56 and /48
-- (`net56`, `net48`; '' for IPv4). Returns the score.
local function draw_slot(groups_key, members_key, moved_key, uid, group, net56, net48)
  local round, rec = 1, nil
  if group ~= '' then
    rec = redis.call('HGET', groups_key, group)
    local last = 0
    local first_score, first_uid
    if rec then
      local l, score, id = string.match(rec, GROUP_RECORD)
      last = tonumber(l)
      if score ~= '' then first_score, first_uid = score, id end
    end
    round = last + 1
    if net56 ~= '' then
      local d56, d48
      if rec then
        local got = redis.call('HMGET', groups_key, net56, net48)
        d56, d48 = tonumber(got[1] or '1'), tonumber(got[2] or '1')
      else
        d56 = redis.call('HINCRBY', groups_key, net56, 1)
        d48 = redis.call('HINCRBY', groups_key, net48, 1)
      end
      round = math.max(round, math.ceil(d56 / PER_56), math.ceil(d48 / PER_48))
    end
    -- Beyond 2^20 rounds one group's later identities share the last one
    -- (the score stays exact below 2^53).
    round = math.min(round, MAX_ROUND)
    local index = redis.call('HINCRBY', groups_key, GR_ROUND .. round, 1)
    local score = (round - 1) * ROUND_SPAN + index
    -- '%.0f': above 2^47 tostring would round the score (%.14g).
    local text = string.format('%.0f', score)
    if not rec then
      redis.call('HSET', groups_key, group, round .. SEP .. text .. SEP .. uid)
    else
      redis.call('HSET', groups_key, group, round)
      if first_uid then
        redis.call('HSET', members_key, first_uid, first_score .. SEP .. group)
        local first = tonumber(first_score)
        if first < ROUND_SPAN then
          redis.call('APPEND', moved_key, string.format('%.0f', first - 1) .. ',')
        end
      end
      redis.call('HSET', members_key, uid, text .. SEP .. group)
    end
    return score
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
-- An address group with more than one identity (`members` exists) is
-- dealt its seats at random before anyone is placed: `members` becomes
-- `draw_members` and draw_shuffle stays 'pending' until the lease holder
-- has dealt them (draw_shuffle.lua); the edge then answers no slot of
-- this draw from its snapshot, since a slot signed at the enter may have
-- been dealt to another identity of its group.
-- `moved` becomes `draw_moved`, its draw's number appended (`#n`; just
-- `#n` when no seat is listed), kept until the next seal for the edge.
local function seal(pre_key, draw_key, seq_key, config_key, groups_key, waiting_key, members_key,
                    draw_members_key, moved_key, draw_moved_key)
  local n = redis.call('ZCARD', pre_key)
  if n == 0 then return 0 end
  redis.call('RENAME', pre_key, draw_key)
  local rounds = round_sizes(groups_key, draw_key, n)
  redis.call('UNLINK', groups_key)
  local number = redis.call('HINCRBY', config_key, CF_DRAW_NUMBER, 1)
  local shuffle = ''
  if redis.call('EXISTS', members_key) == 1 then
    redis.call('RENAME', members_key, draw_members_key)
    shuffle = DS_PENDING
  end
  if redis.call('EXISTS', moved_key) == 1 then
    redis.call('APPEND', moved_key, '#' .. number)
    redis.call('RENAME', moved_key, draw_moved_key)
  else
    redis.call('SET', draw_moved_key, '#' .. number)
  end
  local last = redis.call('INCRBY', seq_key, n)
  redis.call('HSET', config_key, CF_DRAW_BASE, last - n, CF_DRAW_END, last, CF_DRAW_LEFT, n,
    CF_DRAW_DONE, 0, CF_DRAW_ROUNDS, rounds, CF_DRAW_AHEAD, redis.call('ZCARD', waiting_key),
    CF_DRAW_SHUFFLE, shuffle)
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
  r[PR.STOCK_LEFT] = cfg[STOCK.LEFT] or ''
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

-- Stock (docs/drop-day.md, *Stock*). The config's stock_left counts the
-- units neither sold nor held by an order in flight; absent, no stock is
-- kept and nothing here limits anything. A consumed order holds one unit
-- in `stock_held` (user → units) until its settle sells it (as many as the
-- origin says it sold) or gives it back. The functions share one table
-- (like `seen`), the config's stock fields and constants come as STOCK.*
-- (shared/src/fields.rs): the scripts' locals stay within Lua's budget.
local stock = {}
function stock.sold_out(cfg)
  local left = tonumber(cfg[STOCK.LEFT] or '')
  return left ~= nil and left <= 0
end

-- The turns the stock still lets out: the units left times one plus the
-- overbooking margin in force, less the turns out that hold no unit yet
-- (tokens issued, not spent). math.huge without a stock.
function stock.room(config_key, active_key, held_key)
  local f = read_fields(config_key, STOCK.LEFT, STOCK.MARGIN)
  local left = tonumber(f[STOCK.LEFT] or '')
  if not left then return math.huge end
  local out = redis.call('ZCARD', active_key) - redis.call('HLEN', held_key)
  return math.max(0, math.floor(left * (1000 + tonumber(f[STOCK.MARGIN] or '0')) / 1000) - out)
end

-- Holds one unit for uid's order: false, with nothing written, when none
-- is left; true (nothing held) when no stock is kept.
function stock.hold(config_key, held_key, uid)
  local left = tonumber(redis.call('HGET', config_key, STOCK.LEFT) or '')
  if not left then return true end
  if left < 1 then return false end
  redis.call('HINCRBY', config_key, STOCK.LEFT, -1)
  redis.call('HSET', held_key, uid, 1)
  return true
end

-- Ends uid's hold: `units` sold (0: the order failed or lapsed and its
-- unit goes back). An order that sold more than it held takes the rest
-- from the units left (never below 0: the shop has the last word on what
-- it sold); a hold whose stock was cleared meanwhile just ends.
function stock.settle(config_key, held_key, uid, units)
  local held = tonumber(redis.call('HGET', held_key, uid) or '0')
  if held > 0 then redis.call('HDEL', held_key, uid) end
  local left = tonumber(redis.call('HGET', config_key, STOCK.LEFT) or '')
  if not left or (held == 0 and units == 0) then return end
  if units > 0 then redis.call('HINCRBY', config_key, STOCK.SOLD, units) end
  if held ~= units then redis.call('HSET', config_key, STOCK.LEFT, math.max(0, left + held - units)) end
end

-- Each tick: the drop's measured conversion (orders per ended turn, since
-- the stock was first set, once STOCK.MEASURED_AFTER turns ended), units
-- per order, the overbooking margin in force (the operator's, else one
-- no-show's worth per order: ended / ordered - 1, at most STOCK.MARGIN_MAX;
-- none before a measurement) and the turns out, written for the edge's
-- chance estimate and the next scripts. Returns left (-1: no stock), sold,
-- margin per mille and the turns out.
function stock.tick(config_key, stats_key, active_key, held_key)
  local f = read_fields(config_key, STOCK.LEFT, STOCK.SOLD, STOCK.OVERBOOK, STOCK.BASE)
  if not f[STOCK.LEFT] then return -1, 0, 0, 0 end
  local s = read_fields(stats_key, SF_ORDERED, SF_EXPIRED)
  local base_ordered, base_expired = string.match(f[STOCK.BASE] or '', '^(%d+)|(%d+)$')
  -- (Counters reset under the stock count from 0 again.)
  local ordered = math.max(0, tonumber(s[SF_ORDERED] or '0') - tonumber(base_ordered or '0'))
  local ended = ordered + math.max(0, tonumber(s[SF_EXPIRED] or '0') - tonumber(base_expired or '0'))
  local sold = tonumber(f[STOCK.SOLD] or '0')
  local conv, per_order, margin = '', '', 0
  if ordered > 0 then per_order = math.floor(1000 * sold / ordered) end
  if ended >= STOCK.MEASURED_AFTER then
    conv = math.floor(1000 * ordered / ended)
    margin = STOCK.MARGIN_MAX
    if ordered > 0 then margin = math.min(STOCK.MARGIN_MAX, math.floor(1000 * ended / ordered) - 1000) end
  end
  if (f[STOCK.OVERBOOK] or '') ~= '' then margin = 10 * tonumber(f[STOCK.OVERBOOK]) end
  local out = redis.call('ZCARD', active_key) - redis.call('HLEN', held_key)
  redis.call('HSET', config_key, STOCK.MARGIN, margin, STOCK.CONV, conv, STOCK.PER_ORDER, per_order,
    STOCK.OUT, out)
  return tonumber(f[STOCK.LEFT]), sold, margin, out
end
