-- consume: compare-and-delete of an entry token on a protected route.
-- KEYS[1] token:<uid>  KEYS[2] status:<uid>  KEYS[3] active  KEYS[4] config
-- KEYS[5] stock_held (the order holds one unit of a kept stock)
-- ARGV[1] uid  ARGV[2] presented token
-- (in_flight_ms and status_ttl_ms come from the published config, so the
-- edge needs no copy of the settings.)
-- Reply: {'ok'} · {'invalid'} (wrong, unknown or lapsed token; nothing changed)
--   · {'used'} (this token was already consumed) · {'early', wait_ms} (valid
--   but before activateAt; the token survives) · {'sold_out'} (a stock is
--   kept and no unit is left: the token survives for a restock) ·
--   UNCONFIGURED (no published settings; nothing changed).
-- A wrong token never learns the real one's activation time, and parallel
-- replays serialise here: exactly one sees the token.
local uid, presented = ARGV[1], ARGV[2]
local rec = redis.call('GET', KEYS[1])
if not rec then
  local st = redis.call('GET', KEYS[2])
  if st then
    local f = split(st)
    if (f[SR_KIND] == ST_IN_FLIGHT or f[SR_KIND] == ST_ORDERED) and f[SR_TOKEN] == presented then
      return {R.USED}
    end
  end
  return {R.INVALID}
end

local f = split(rec)
if f[TR_TOKEN] ~= presented then return {R.INVALID} end
local now = now_ms()
local activate, expires = tonumber(f[TR_ACTIVATE_AT]), tonumber(f[TR_EXPIRES_AT])
-- A token is good in [activateAt, expiresAt) and only while it holds a slot.
if now >= expires or not redis.call('ZSCORE', KEYS[3], uid) then
  return {R.INVALID}
end
if now < activate then return {R.EARLY, activate - now} end

local cfg = required_config(KEYS[4], CF_IN_FLIGHT_MS, CF_STATUS_TTL_MS)
if not cfg then return UNCONFIGURED end
if not stock.hold(KEYS[4], KEYS[5], uid) then return {R.SOLD_OUT} end
redis.call('DEL', KEYS[1])
set_status(KEYS[2], uid, ST_IN_FLIGHT, now, tonumber(cfg[CF_STATUS_TTL_MS]), rec)
redis.call('ZADD', KEYS[3], now + tonumber(cfg[CF_IN_FLIGHT_MS]), uid)
return {R.OK}
