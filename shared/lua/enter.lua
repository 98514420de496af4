-- enter: join the line, or report the place/token the user already has.
-- KEYS[1] waiting  KEYS[2] seq  KEYS[3] seen  KEYS[4] token:<uid>
-- KEYS[5] status:<uid>  KEYS[6] active  KEYS[7] config  KEYS[8] stats
-- ARGV[1] uid
-- Reply: a waiting_reply or settled_state reply (see prelude), or
--   {'full', waiting, max_waiting} · {'closed', state} ('unconfigured' when
--   no scheduler has published settings yet).
-- A refresh never moves anyone: a waiting user keeps their ticket. The size
-- check and the ZADD run in one script, so the limit holds under any race.
local uid = ARGV[1]
local now = now_ms()

local rank = redis.call('ZRANK', KEYS[1], uid)
if rank then
  redis.call('ZADD', KEYS[3], now, uid)
  return waiting_reply(rank + 1, KEYS[7], KEYS[8])
end

local current = settled_state(KEYS[4], KEYS[5])
if current[1] == 'admitted' or current[1] == 'in_flight' then
  return current
end

local cfg = redis.call('HMGET', KEYS[7], 'state', 'max_waiting')
if not cfg[1] or not cfg[2] then return {'closed', 'unconfigured'} end
if cfg[1] ~= 'open' and cfg[1] ~= 'paused' then return {'closed', cfg[1]} end
local size = redis.call('ZCARD', KEYS[1])
local max = tonumber(cfg[2])
if size >= max then return {'full', size, max} end

-- A rejoin ends the previous entry: an issued token that lapsed before the
-- sweep saw it still holds a slot; free it and count it as expired.
if redis.call('ZREM', KEYS[6], uid) == 1 then
  redis.call('HINCRBY', KEYS[8], 'expired', 1)
end
redis.call('DEL', KEYS[4], KEYS[5])

local ticket = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], ticket, uid)
redis.call('ZADD', KEYS[3], now, uid)
redis.call('HINCRBY', KEYS[8], 'entered', 1)
return waiting_reply(size + 1, KEYS[7], KEYS[8])
