-- bypass: staff and QA links that pass a queue's gate without queueing
-- (docs/scheduler.md, "Bypass links"). One HASH field per link:
--   <id> -> sha|expiresAt|revoked|uses|lastUsedAt|createdAt|name
-- where sha is the SHA-256 of the link's key (the key itself is never
-- stored) and id its first 12 hex digits.
-- KEYS[1] bypass hash, KEYS[2] stats
-- ARGV[1] mode, then per mode (Reply: per mode, {0, why} when refused):
--   use|check  ARGV[2] id, ARGV[3] sha     -> {1, name, expiresAt} | {0, why}
--              (use also counts the use: uses+1, lastUsedAt, stats bypassed)
--   create     ARGV[2] id, ARGV[3] sha, ARGV[4] ttl ms, ARGV[5] name,
--              ARGV[6] most live links      -> {1, createdAt, expiresAt} | {0, why}
--              (links expired over a day ago are dropped first)
--   revoke     ARGV[2] id                   -> {1, name} | {0, why}
local mode, id = ARGV[1], ARGV[2]
local now = now_ms()
local B_SHA, B_EXP, B_REV, B_USES, B_LAST, B_CREATED, B_NAME = 1, 2, 3, 4, 5, 6, 7

local function parse(rec)
  local f = split(rec)
  if #f < B_NAME then return nil end
  -- The name may not hold the separator (checked at creation): the rest is it.
  return f
end

if mode == 'use' or mode == 'check' then
  local rec = redis.call('HGET', KEYS[1], id)
  local f = rec and parse(rec)
  if not f or f[B_SHA] ~= ARGV[3] then return {0, R.UNKNOWN} end
  if f[B_REV] == '1' then return {0, R.REVOKED} end
  if tonumber(f[B_EXP]) <= now then return {0, R.EXPIRED} end
  if mode == 'use' then
    f[B_USES] = tostring(tonumber(f[B_USES]) + 1)
    f[B_LAST] = tostring(now)
    redis.call('HSET', KEYS[1], id, table.concat(f, SEP))
    redis.call('HINCRBY', KEYS[2], SF_BYPASSED, 1)
  end
  return {1, f[B_NAME], tonumber(f[B_EXP])}
elseif mode == 'create' then
  local all = redis.call('HGETALL', KEYS[1])
  local live = 0
  for i = 1, #all, 2 do
    local f = parse(all[i + 1])
    if not f or tonumber(f[B_EXP]) + 86400000 <= now then
      redis.call('HDEL', KEYS[1], all[i])
    elseif tonumber(f[B_EXP]) > now and f[B_REV] ~= '1' then
      live = live + 1
    end
  end
  if live >= tonumber(ARGV[6]) then return {0, R.FULL} end
  local expires = now + tonumber(ARGV[4])
  local rec = record(ARGV[3], expires, '0', '0', '0', now, ARGV[5])
  if redis.call('HSETNX', KEYS[1], id, rec) == 0 then return {0, R.EXISTS} end
  return {1, now, expires}
elseif mode == 'revoke' then
  local rec = redis.call('HGET', KEYS[1], id)
  local f = rec and parse(rec)
  if not f then return {0, R.UNKNOWN} end
  f[B_REV] = '1'
  redis.call('HSET', KEYS[1], id, table.concat(f, SEP))
  return {1, f[B_NAME]}
end
return redis.error_reply('bypass: unknown mode ' .. tostring(mode))
