-- settings: an operator changes a queue's run-time settings, if nobody
-- changed them since the caller read them (the caller validated the
-- result against those).
-- KEYS[1] settings (HASH: setting → JSON value)  KEYS[2] config
-- KEYS[3] wake (an idle lease holder waits on it)
-- ARGV[1] the settings_version the caller read ('' none yet)
-- ARGV[2] how many settings to set (n), then n pairs name, JSON value,
--   then the names to remove
-- Reply: {1, version} changed, at this new version · {0, version} not
--   changed: the settings are at this version now (read them again).
-- The lease holder sees the new version in its next admit reply and
-- applies the settings (docs/scheduler.md, *Settings at run time*).
local now_version = redis.call('HGET', KEYS[2], CF_SETTINGS_VERSION) or ''
if now_version ~= ARGV[1] then return {0, tonumber(now_version) or 0} end
local n = tonumber(ARGV[2])
for i = 3, 2 + 2 * n, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
for i = 3 + 2 * n, #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[i])
end
redis.call('LPUSH', KEYS[3], 1)
redis.call('LTRIM', KEYS[3], 0, 0)
return {1, redis.call('HINCRBY', KEYS[2], CF_SETTINGS_VERSION, 1)}
