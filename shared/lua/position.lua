-- position: the user's state; a waiting user is marked as seen (not a leaver).
-- KEYS[1] waiting  KEYS[2] token:<uid>  KEYS[3] status:<uid>  KEYS[4] config
-- ARGV[1] uid  ARGV[2] key base '<prefix>:{<queue>}:' (for the seen bitmaps)
-- Reply: a waiting_reply or settled_state reply (see prelude).
local uid, base = ARGV[1], ARGV[2]
local ticket = redis.call('ZSCORE', KEYS[1], uid)
if ticket then
  local cfg = read_config(KEYS[4])
  if cfg[CFG_ABANDON] then mark_seen(base, now_ms(), tonumber(ticket), tonumber(cfg[CFG_ABANDON])) end
  return waiting_reply(redis.call('ZRANK', KEYS[1], uid) + 1, cfg)
end
return settled_state(KEYS[2], KEYS[3])
