-- unconsume: give back a consumed token whose request never reached the
-- origin. The edge calls it when a consume's (or a pass's) reply was lost
-- (no answer in time): the script may have run and left the visitor in
-- flight, without a token, for a request the edge never forwarded.
-- KEYS[1] status:<uid>  KEYS[2] token:<uid>  KEYS[3] active  KEYS[4] stats
-- KEYS[5] config (status_ttl_ms)  KEYS[6] session:<uid> (ended with the
-- turn when it is expired)  KEYS[7] stock_held (the unit goes back)
-- ARGV[1] uid  ARGV[2] token (the one the lost call spent)
-- Reply: {'restored', expiresAt} (the same token is valid again, with its
--   own activateAt, expiresAt and restore count: no retry window is spent
--   and no origin answer counted) · {'expired'} (its time had passed, or
--   it had no retry: an idle-passthrough record; the slot is freed) ·
--   {'stale'} (not in flight with this token: the lost call never ran, or
--   a settle came first; nothing changed) · UNCONFIGURED (nothing changed).
local uid, token = ARGV[1], ARGV[2]
local st = redis.call('GET', KEYS[1])
if not st then return {R.STALE} end
local f = split(st)
if f[SR_KIND] ~= ST_IN_FLIGHT or f[SR_TOKEN] ~= token then return {R.STALE} end
local cfg = required_config(KEYS[5], CF_STATUS_TTL_MS)
if not cfg then return UNCONFIGURED end
local status_ttl = tonumber(cfg[CF_STATUS_TTL_MS])
local now = now_ms()
stock.settle(KEYS[5], KEYS[7], uid, 0)
-- A slot swept while in flight was counted as lapsed; it ends here.
local held = redis.call('ZREM', KEYS[3], uid) == 1
if not held then redis.call('HINCRBY', KEYS[4], SF_LAPSED, -1) end
local expires = tonumber(f[SR_EXPIRES_AT])
if not held or expires <= now then
  redis.call('DEL', KEYS[6])
  set_status(KEYS[1], uid, ST_EXPIRED, now, status_ttl)
  redis.call('HINCRBY', KEYS[4], SF_EXPIRED, 1)
  return {R.EXPIRED}
end
redis.call('SET', KEYS[2], token_record(token, f[SR_ACTIVATE_AT], expires, f[SR_RESTORES]), 'PX', expires - now)
set_status(KEYS[1], uid, ST_ISSUED, now, status_ttl)
redis.call('ZADD', KEYS[3], expires, uid)
return {R.RESTORED, expires}
