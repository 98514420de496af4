-- status: what the operator's `status` shows of one queue, in one read.
-- KEYS[1] config  KEYS[2] waiting  KEYS[3] active  KEYS[4] stats  KEYS[5] lock
-- KEYS[6] pre  KEYS[7] claims
-- Reply: {config as field/value pairs, waiting count, active count,
--   stats as field/value pairs, lease holder or '', lease pttl ms (-2 none),
--   pre-queued count, claims count}
-- Read-only.
return {
  redis.call('HGETALL', KEYS[1]),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  redis.call('HGETALL', KEYS[4]),
  redis.call('GET', KEYS[5]) or '',
  redis.call('PTTL', KEYS[5]),
  redis.call('ZCARD', KEYS[6]),
  redis.call('ZCARD', KEYS[7]),
}
