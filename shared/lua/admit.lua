-- admit: one scheduler tick for one queue, atomically.
-- KEYS[1] waiting  KEYS[2] seen  KEYS[3] active  KEYS[4] lock  KEYS[5] config
-- KEYS[6] stats
-- ARGV[1] lease owner id     ARGV[2] key base '<prefix>:{<queue>}:'
-- ARGV[3] allowance (most admissions this tick, from the caller's token bucket)
-- ARGV[4] max_active  ARGV[5] token_ttl_ms  ARGV[6] status_ttl_ms
-- ARGV[7] abandon_after_ms  ARGV[8] sweep_limit
-- ARGV[9] measured admission rate per second to record ('' keeps the old one)
-- ARGV[10..] pairs: token, activation jitter ms (one pair per possible admission)
-- Reply: {code, admitted, expired, lapsed, abandoned, waiting, active}
--   code 1 admitted (maybe 0 users) · 2 queue not admitting (paused/closed;
--   sweeps still ran) · 0 caller does not own the lease: nothing changed.
-- Safety never depends on the lock alone: free slots are computed here, so
-- two schedulers running at once cannot over-admit, and a stale owner is
-- fenced off by the owner check.
if redis.call('GET', KEYS[4]) ~= ARGV[1] then
  return {0, 0, 0, 0, 0, 0, 0}
end

local base = ARGV[2]
local allowance = tonumber(ARGV[3])
local max_active = tonumber(ARGV[4])
local token_ttl = tonumber(ARGV[5])
local status_ttl = tonumber(ARGV[6])
local abandon_after = tonumber(ARGV[7])
local limit = tonumber(ARGV[8])
local now = now_ms()

-- 1. Free the slots whose time is up. An unused token is expired; a consume
--    whose origin never settled has lapsed (a late settle still counts it).
local expired, lapsed = 0, 0
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit)
for _, uid in ipairs(gone) do
  local status_key = base .. 'status:' .. uid
  local st = redis.call('GET', status_key)
  if st and string.sub(st, 1, 10) == 'IN_FLIGHT|' then
    lapsed = lapsed + 1
  else
    expired = expired + 1
    redis.call('DEL', base .. 'token:' .. uid)
    if st then redis.call('SET', status_key, 'EXPIRED|' .. now, 'KEEPTTL') end
  end
end
if #gone > 0 then redis.call('ZREM', KEYS[3], unpack(gone)) end

-- 2. Drop leavers: waiting users who have not polled for abandon_after.
local left = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - abandon_after, 'LIMIT', 0, limit)
for _, uid in ipairs(left) do
  redis.call('SET', base .. 'status:' .. uid, 'ABANDONED|' .. now, 'PX', status_ttl)
end
if #left > 0 then
  redis.call('ZREM', KEYS[1], unpack(left))
  redis.call('ZREM', KEYS[2], unpack(left))
end

-- 3. Admit up to the free slots and the allowance, one token per user.
local code, admitted = 1, 0
local state = redis.call('HGET', KEYS[5], 'state')
if state == 'open' or state == 'draining' then
  local free = max_active - redis.call('ZCARD', KEYS[3])
  local n = math.min(free, allowance, math.floor((#ARGV - 9) / 2))
  if n > 0 then
    local popped = redis.call('ZPOPMIN', KEYS[1], n)
    local uids = {}
    for i = 1, #popped, 2 do
      local uid = popped[i]
      local k = 10 + (i - 1)            -- ARGV index of this user's token
      local activate = now + tonumber(ARGV[k + 1])
      local expires = activate + token_ttl
      redis.call('SET', base .. 'token:' .. uid,
        ARGV[k] .. '|' .. activate .. '|' .. expires .. '|0', 'PX', expires - now)
      redis.call('SET', base .. 'status:' .. uid, 'ISSUED|' .. now, 'PX', status_ttl)
      redis.call('ZADD', KEYS[3], expires, uid)
      uids[#uids + 1] = uid
    end
    admitted = #uids
    if admitted > 0 then redis.call('ZREM', KEYS[2], unpack(uids)) end
  end
else
  code = 2
end

-- 4. Counters and the rate estimate the ETA uses.
if admitted > 0 then redis.call('HINCRBY', KEYS[6], 'admitted', admitted) end
if expired > 0 then redis.call('HINCRBY', KEYS[6], 'expired', expired) end
if lapsed > 0 then redis.call('HINCRBY', KEYS[6], 'lapsed', lapsed) end
if #left > 0 then redis.call('HINCRBY', KEYS[6], 'abandoned', #left) end
if ARGV[9] ~= '' then redis.call('HSET', KEYS[6], 'rate', ARGV[9]) end

return {code, admitted, expired, lapsed, #left, redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[3])}
