-- origin_window: the origin's recent answers and the origin control's
-- state, for the scheduler (the lease holder, once a second).
-- KEYS[1] lock  KEYS[2] config
-- ARGV[1] lease owner id  ARGV[2] key base '<prefix>:{<queue>}:'
-- ARGV[3] seconds to read: the current (partial) one and those before it
-- ARGV[4..] pairs: config field, value — the holder's last control step
--   (target_rate, origin_cut_at, origin_error_share, origin_p95_ms),
--   recorded so a new holder carries on from it
-- Reply: {1, now second, target_rate or '', origin_cut_at or '', then per
--   second, newest first: ok, c5, none, lat:1 .. lat:n} (counts, 0 when
--   the second saw nothing; 4xx are the visitors' and never counted) · {0} the caller does not own the lease:
--   nothing written.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
if #ARGV > 4 then redis.call('HSET', KEYS[2], unpack(ARGV, 4)) end
local state = read_fields(KEYS[2], CF_TARGET_RATE, CF_ORIGIN_CUT_AT)
local now = math.floor(now_ms() / ORIGIN_BUCKET_MS)
local reply = {1, now, state[CF_TARGET_RATE] or '', state[CF_ORIGIN_CUT_AT] or ''}
local fields = {OF_OK, OF_SERVER_ERROR, OF_NO_ANSWER}
for i = 1, #ORIGIN_LATENCY_EDGES + 1 do fields[#fields + 1] = OF_LATENCY .. i end
for second = now, now - tonumber(ARGV[3]) + 1, -1 do
  local counts = redis.call('HMGET', ARGV[2] .. K_ORIGIN .. second, unpack(fields))
  for i = 1, #fields do reply[#reply + 1] = tonumber(counts[i] or '0') end
end
return reply
