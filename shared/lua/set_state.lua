-- set_state: the operator switches a queue (open, pause, drain, close).
-- KEYS[1] config
-- ARGV[1] new state
-- Reply: {previous state or '', new state}
local previous = redis.call('HGET', KEYS[1], 'state')
redis.call('HSET', KEYS[1], 'state', ARGV[1])
return {previous or '', ARGV[1]}
