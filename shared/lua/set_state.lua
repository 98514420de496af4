-- set_state: the operator switches a queue (open, pause, drain, close).
-- KEYS[1] config
-- ARGV[1] new state  ARGV[2] the state the queue must be in ('' for any)
-- Reply: {1, previous state or ''} switched · {0, current state or ''} the
--   queue is not in the expected state: nothing changed.
-- The comparison runs here, in the same step as the switch, so a command
-- that lands between an operator's look and their switch is never undone.
local current = redis.call('HGET', KEYS[1], CF_STATE) or ''
if ARGV[2] ~= '' and current ~= ARGV[2] then return {0, current} end
redis.call('HSET', KEYS[1], CF_STATE, ARGV[1])
return {1, current}
