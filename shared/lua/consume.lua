-- consume: compare-and-delete of an entry token on a protected route.
-- KEYS[1] token:<uid>  KEYS[2] status:<uid>  KEYS[3] active  KEYS[4] config
-- ARGV[1] uid  ARGV[2] presented token
-- (in_flight_ms and status_ttl_ms come from the published config, so the
-- edge needs no copy of the settings.)
-- Reply: {'ok'} · {'invalid'} (wrong, unknown or lapsed token; nothing changed)
--   · {'used'} (this token was already consumed) · {'early', wait_ms} (valid
--   but before activateAt; the token survives).
-- A wrong token never learns the real one's activation time, and parallel
-- replays serialise here: exactly one sees the token.
local uid, presented = ARGV[1], ARGV[2]
local rec = redis.call('GET', KEYS[1])
if not rec then
  local st = redis.call('GET', KEYS[2])
  if st then
    local f = split(st)
    if (f[1] == 'IN_FLIGHT' or f[1] == 'ORDERED') and f[3] == presented then
      return {'used'}
    end
  end
  return {'invalid'}
end

local f = split(rec)
if f[1] ~= presented then return {'invalid'} end
local now = now_ms()
local activate, expires = tonumber(f[2]), tonumber(f[3])
-- A token is good in [activateAt, expiresAt) and only while it holds a slot.
if now >= expires or not redis.call('ZSCORE', KEYS[3], uid) then
  return {'invalid'}
end
if now < activate then return {'early', activate - now} end

local cfg = redis.call('HMGET', KEYS[4], 'in_flight_ms', 'status_ttl_ms')
if not cfg[1] or not cfg[2] then return {'invalid'} end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], 'IN_FLIGHT|' .. now .. '|' .. rec, 'PX', tonumber(cfg[2]))
redis.call('ZADD', KEYS[3], now + tonumber(cfg[1]), uid)
return {'ok'}
