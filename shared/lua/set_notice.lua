-- set_notice: the operator sets or clears the notice to the line.
-- KEYS[1] config
-- ARGV[1] the notice, already checked (shared/src/notice.rs); '' clears it
-- Reply: the notice before, or ''.
-- The edge reads it with its snapshot and shows it on every reply.
local before = redis.call('HGET', KEYS[1], CF_NOTICE) or ''
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], CF_NOTICE)
else
  redis.call('HSET', KEYS[1], CF_NOTICE, ARGV[1])
end
return before
