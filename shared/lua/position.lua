-- position: the user's state; a waiting user is marked as seen (not a leaver).
-- KEYS[1] waiting  KEYS[2] seen  KEYS[3] token:<uid>  KEYS[4] status:<uid>
-- KEYS[5] config  KEYS[6] stats
-- ARGV[1] uid
-- Reply: a waiting_reply or settled_state reply (see prelude).
local uid = ARGV[1]
local rank = redis.call('ZRANK', KEYS[1], uid)
if rank then
  redis.call('ZADD', KEYS[2], 'XX', now_ms(), uid)
  return waiting_reply(rank + 1, KEYS[5], KEYS[6])
end
return settled_state(KEYS[3], KEYS[4])
