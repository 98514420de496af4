-- lease_acquire: take the queue's scheduler lease, or extend it if ours.
-- KEYS[1] lock
-- ARGV[1] owner id  ARGV[2] ttl ms
-- Reply: {1, owner} acquired/extended · {0, holder, pttl} held by someone
--   else, for pttl more ms (a standby tries again then, not before)
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, ARGV[1]}
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, holder}
end
return {0, holder, redis.call('PTTL', KEYS[1])}
