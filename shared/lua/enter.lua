-- enter: join the line, or report the place/token the user already has.
-- KEYS[1] waiting  KEYS[2] seq  KEYS[3] token:<uid>  KEYS[4] status:<uid>
-- KEYS[5] active  KEYS[6] config  KEYS[7] stats
-- ARGV[1] uid  ARGV[2] key base '<prefix>:{<queue>}:' (for the seen bitmaps)
-- Reply: a waiting_reply or settled_state reply (see prelude), or
--   {'full', waiting, max_waiting} · {'closed', state} · UNCONFIGURED (no
--   scheduler has published settings yet; nothing written).
-- A refresh never moves anyone: a waiting user keeps their ticket. The size
-- check and the ZADD run in one script, so the limit holds under any race.
local uid, base = ARGV[1], ARGV[2]
local cfg = read_config(KEYS[6])
local now = now_ms()

local ticket = redis.call('ZSCORE', KEYS[1], uid)
if ticket then
  if cfg[CFG_ABANDON] then mark_seen(base, now, tonumber(ticket), tonumber(cfg[CFG_ABANDON])) end
  return waiting_reply(redis.call('ZRANK', KEYS[1], uid) + 1, cfg)
end

local current = settled_state(KEYS[3], KEYS[4])
if current[1] == 'admitted' or current[1] == 'in_flight' then
  return current
end

local state = cfg[CFG_STATE]
if not state or not cfg[CFG_MAX_WAITING] or not cfg[CFG_ABANDON] then
  return UNCONFIGURED
end
if state ~= QS_OPEN and state ~= QS_PAUSED then return {'closed', state} end
local size = redis.call('ZCARD', KEYS[1])
local max = tonumber(cfg[CFG_MAX_WAITING])
if size >= max then return {'full', size, max} end

-- A rejoin ends the previous entry: an issued token that lapsed before the
-- sweep saw it still holds a slot; free it and count it as expired.
if redis.call('ZREM', KEYS[5], uid) == 1 then
  redis.call('HINCRBY', KEYS[7], SF_EXPIRED, 1)
end
redis.call('DEL', KEYS[3], KEYS[4])

local new_ticket = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], new_ticket, uid)
mark_seen(base, now, new_ticket, tonumber(cfg[CFG_ABANDON]))
redis.call('HINCRBY', KEYS[7], SF_ENTERED, 1)
return waiting_reply(size + 1, cfg)
