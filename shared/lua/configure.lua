-- configure: publish a queue's effective settings.
-- KEYS[1] config
-- ARGV[1] initial state (used only if the queue has none yet)
-- ARGV[2..] pairs: setting name, value
-- Reply: the queue state now in force.
-- The operator's state (open/paused/draining/closed) is never overwritten
-- here: a restarting scheduler must not reopen a queue someone closed.
if #ARGV > 1 then redis.call('HSET', KEYS[1], unpack(ARGV, 2)) end
redis.call('HSETNX', KEYS[1], CF_STATE, ARGV[1])
return redis.call('HGET', KEYS[1], CF_STATE)
