-- prelude: helpers shared by the queue scripts (prepended to each at build
-- time, so every script stays one self-contained EVAL).
--
-- Records (fields joined by '|'):
--   token:<uid>   token|activateAt|expiresAt|restores
--   status:<uid>  ISSUED|at · IN_FLIGHT|at|token|activateAt|expiresAt|restores
--                 · ORDERED|at|token · EXPIRED|at · ABANDONED|at
-- All times are epoch milliseconds from Redis TIME: one clock for all.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function split(s)
  local out = {}
  for part in string.gmatch(s, '[^|]+') do out[#out + 1] = part end
  return out
end

-- The state of a user who is not in the waiting set:
-- {'admitted', token, activateAt, expiresAt} or {kind}.
local function settled_state(token_key, status_key)
  local tok = redis.call('GET', token_key)
  if tok then
    local f = split(tok)
    return {'admitted', f[1], f[2], f[3]}
  end
  local st = redis.call('GET', status_key)
  if not st then return {'not_in_queue'} end
  local kind = split(st)[1]
  if kind == 'IN_FLIGHT' then return {'in_flight'} end
  if kind == 'ORDERED' then return {'ordered'} end
  if kind == 'ABANDONED' then return {'abandoned'} end
  -- EXPIRED, or ISSUED whose token has lapsed before the sweep saw it.
  return {'expired'}
end

-- {'waiting', position, queue state, measured rate, admit rate, poll min, poll max}
local function waiting_reply(position, config_key, stats_key)
  local cfg = redis.call('HMGET', config_key, 'state', 'admit_rate_per_second', 'poll_min_ms', 'poll_max_ms')
  local rate = redis.call('HGET', stats_key, 'rate')
  return {'waiting', position, cfg[1] or '', rate or '', cfg[2] or '', cfg[3] or '', cfg[4] or ''}
end

