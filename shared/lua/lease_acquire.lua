-- lease_acquire: take the queue's scheduler lease, or extend it if ours.
-- KEYS[1] lock  KEYS[2] config
-- ARGV[1] owner id  ARGV[2] ttl ms
-- Reply: {1, owner, 0, file} acquired/extended · {0, holder, pttl, file}
--   held by someone else, for pttl more ms (a standby tries again then,
--   not before); file: the published config file's fingerprint ('' none),
--   which a scheduler compares with its own
local holder = redis.call('GET', KEYS[1])
local file = redis.call('HGET', KEYS[2], CF_FILE_FINGERPRINT) or ''
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, ARGV[1], 0, file}
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, holder, 0, file}
end
return {0, holder, redis.call('PTTL', KEYS[1]), file}
