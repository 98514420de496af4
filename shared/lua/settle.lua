-- settle: the origin's answer after a consume.
-- KEYS[1] status:<uid>  KEYS[2] token:<uid>  KEYS[3] active  KEYS[4] stats
-- KEYS[5] config (retry_window_ms, status_ttl_ms)
-- ARGV[1] uid  ARGV[2] token  ARGV[3] 'ok' | 'fail'
-- Reply: {'ordered'} · {'restored', expiresAt} (the same token is valid
--   again) · {'expired'} (failure, but no retry window is left) · {'stale'}
--   (not in flight with this token: a duplicate settle changes nothing).
-- A failed order gets one retry window: the first restore extends the
-- token to at least now + retry_window, later ones keep that expiry.
local uid, token, outcome = ARGV[1], ARGV[2], ARGV[3]
local cfg = redis.call('HMGET', KEYS[5], 'retry_window_ms', 'status_ttl_ms')
local retry_window = tonumber(cfg[1] or '60000')
local status_ttl = tonumber(cfg[2] or '420000')
local st = redis.call('GET', KEYS[1])
if not st then return {'stale'} end
-- IN_FLIGHT|at|token|activateAt|expiresAt|restores
local f = split(st)
if f[1] ~= 'IN_FLIGHT' or f[3] ~= token then return {'stale'} end

local now = now_ms()
-- A slot swept while in flight was counted as lapsed; this settle moves
-- the entry out of 'lapsed' into its final state.
local held = redis.call('ZREM', KEYS[3], uid) == 1
if not held then redis.call('HINCRBY', KEYS[4], 'lapsed', -1) end

if outcome == 'ok' then
  redis.call('SET', KEYS[1], 'ORDERED|' .. now .. '|' .. token, 'PX', status_ttl)
  redis.call('HINCRBY', KEYS[4], 'ordered', 1)
  return {'ordered'}
end

local expires = tonumber(f[5])
local restores = tonumber(f[6])
if restores == 0 then expires = math.max(expires, now + retry_window) end
if not held or expires <= now then
  -- The slot is gone (maybe reused) or the window has passed: no retry.
  redis.call('SET', KEYS[1], 'EXPIRED|' .. now, 'PX', status_ttl)
  redis.call('HINCRBY', KEYS[4], 'expired', 1)
  return {'expired'}
end
redis.call('SET', KEYS[2], token .. '|' .. f[4] .. '|' .. expires .. '|' .. (restores + 1), 'PX', expires - now)
redis.call('SET', KEYS[1], 'ISSUED|' .. now, 'PX', status_ttl)
redis.call('ZADD', KEYS[3], expires, uid)
redis.call('HINCRBY', KEYS[4], 'restored', 1)
return {'restored', expires}
