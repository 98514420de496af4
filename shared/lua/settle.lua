-- settle: the origin's answer after a consume.
-- KEYS[1] status:<uid>  KEYS[2] token:<uid>  KEYS[3] active  KEYS[4] stats
-- KEYS[5] config (retry_window_ms, status_ttl_ms)  KEYS[6] sampled:<uid>
-- KEYS[7] session:<uid> (ended with the turn: no retry left)
-- KEYS[8] stock_held (the unit the order holds of a kept stock)
-- ARGV[1] uid  ARGV[2] token
-- ARGV[3] the origin's answer: OF_OK (2xx/3xx) | OF_CLIENT_ERROR (4xx, or
--   the visitor's own request failed: its body never arrived whole) |
--   OF_SERVER_ERROR (5xx) | OF_NO_ANSWER; only OF_OK is a success
-- ARGV[4] the origin's latency in ms (from the request leaving the edge
--   with its body in hand to the response headers)
-- ARGV[5] key base '<prefix>:{<queue>}:'
-- ARGV[6] the units the order sold (the origin's Queuegate-Units, else 1;
--   counted only on OF_OK)
-- Reply: {'ordered'} · {'restored', expiresAt} (the same token is valid
--   again) · {'expired'} (failure, but no retry window is left) · {'stale'}
--   (not in flight with this token: a duplicate settle changes nothing)
--   · UNCONFIGURED (no published settings; nothing changed, the slot lapses).
-- A failed order gets one retry window: the first restore extends the
-- token to at least now + retry_window, later ones keep that expiry.
-- A real settle also counts the answer in origin:<second> for the
-- scheduler's origin control (docs/engine.md): not a 4xx (the visitor's
-- doing, not the origin's), and at most one a second per user (KEYS[6]),
-- so a few admitted visitors cannot fill the window.
local uid, token, answer = ARGV[1], ARGV[2], ARGV[3]
if answer ~= OF_OK and answer ~= OF_CLIENT_ERROR and answer ~= OF_SERVER_ERROR and answer ~= OF_NO_ANSWER then
  return redis.error_reply('settle: unknown answer class')
end
local latency = tonumber(ARGV[4])
if not latency then return redis.error_reply('settle: latency is not a number') end
local units = tonumber(ARGV[6])
if not units or units < 0 or units ~= math.floor(units) then
  return redis.error_reply('settle: units is not a count')
end
local st = redis.call('GET', KEYS[1])
if not st then return {R.STALE} end
local f = split(st)
if f[SR_KIND] ~= ST_IN_FLIGHT or f[SR_TOKEN] ~= token then return {R.STALE} end
local cfg = required_config(KEYS[5], CF_RETRY_WINDOW_MS, CF_STATUS_TTL_MS)
if not cfg then return UNCONFIGURED end
local retry_window, status_ttl = tonumber(cfg[CF_RETRY_WINDOW_MS]), tonumber(cfg[CF_STATUS_TTL_MS])

local now = now_ms()

-- Origin health: one hash per Redis second, counts by answer class and
-- latency bucket, expiring by itself (no extra round trip for the edge).
if answer ~= OF_CLIENT_ERROR and redis.call('SET', KEYS[6], '1', 'NX', 'PX', ORIGIN_BUCKET_MS) then
  local seen = ARGV[5] .. K_ORIGIN .. math.floor(now / ORIGIN_BUCKET_MS)
  if redis.call('HINCRBY', seen, answer, 1) == 1 then redis.call('PEXPIRE', seen, ORIGIN_KEEP_MS) end
  local slot = 1
  while slot <= #ORIGIN_LATENCY_EDGES and latency > ORIGIN_LATENCY_EDGES[slot] do slot = slot + 1 end
  redis.call('HINCRBY', seen, OF_LATENCY .. slot, 1)
end

-- A slot swept while in flight was counted as lapsed; this settle moves
-- the entry out of 'lapsed' into its final state.
local held = redis.call('ZREM', KEYS[3], uid) == 1
if not held then redis.call('HINCRBY', KEYS[4], SF_LAPSED, -1) end

-- A kept stock sells the units (or takes back the unit a failed order
-- held; docs/drop-day.md, *Stock*).
if answer == OF_OK then
  stock.settle(KEYS[5], KEYS[8], uid, units)
  set_status(KEYS[1], uid, ST_ORDERED, now, status_ttl, token)
  redis.call('HINCRBY', KEYS[4], SF_ORDERED, 1)
  return {R.ORDERED}
end

stock.settle(KEYS[5], KEYS[8], uid, 0)
local expires = tonumber(f[SR_EXPIRES_AT])
local restores = tonumber(f[SR_RESTORES])
if restores == 0 then expires = math.max(expires, now + retry_window) end
if not held or expires <= now then
  -- The slot is gone (maybe reused) or the window has passed: no retry,
  -- and the session ends with the turn.
  redis.call('DEL', KEYS[7])
  set_status(KEYS[1], uid, ST_EXPIRED, now, status_ttl)
  redis.call('HINCRBY', KEYS[4], SF_EXPIRED, 1)
  return {R.EXPIRED}
end
redis.call('SET', KEYS[2], token_record(token, f[SR_ACTIVATE_AT], expires, restores + 1), 'PX', expires - now)
set_status(KEYS[1], uid, ST_ISSUED, now, status_ttl)
redis.call('ZADD', KEYS[3], expires, uid)
redis.call('HINCRBY', KEYS[4], SF_RESTORED, 1)
return {R.RESTORED, expires}
