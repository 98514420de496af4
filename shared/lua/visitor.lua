-- visitor: what the operator's `visitor` lookup shows of one visitor, in
-- one read (one slot, so it works on a cluster too).
-- KEYS[1] waiting  KEYS[2] pre  KEYS[3] draw  KEYS[4] active
-- KEYS[5] token:<uid>  KEYS[6] status:<uid>  KEYS[7] history:<uid>
-- KEYS[8] claims
-- ARGV[1] uid
-- Reply: {rank in line (0 is next) or nil, ticket (in line, or of a claim:
--   status CLAIMED) or nil, pre-queue score
--   or nil, draw score or nil, slot deadline (epoch ms) or nil, status
--   record or '', the status record's pttl ms (-2 none, -1 no expiry),
--   token record or '', history entries `kind|at` (oldest first)}
-- Read-only: nothing is marked seen, so a lookup never keeps a visitor in
-- line.
local uid = ARGV[1]
return {
  redis.call('ZRANK', KEYS[1], uid),
  redis.call('ZSCORE', KEYS[1], uid) or redis.call('ZSCORE', KEYS[8], uid),
  redis.call('ZSCORE', KEYS[2], uid),
  redis.call('ZSCORE', KEYS[3], uid),
  redis.call('ZSCORE', KEYS[4], uid),
  redis.call('GET', KEYS[6]) or '',
  redis.call('PTTL', KEYS[6]),
  redis.call('GET', KEYS[5]) or '',
  redis.call('LRANGE', KEYS[7], 0, -1),
}
