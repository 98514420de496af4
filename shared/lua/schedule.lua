-- schedule: sets or clears a queue's scheduled opening and closing.
-- KEYS[1] config  KEYS[2] wake (an idle lease holder's wake-up list)
-- ARGV[1] opens_at epoch ms · '-' clear · '' keep
-- ARGV[2] closes_at epoch ms · '-' clear · '' keep
-- Reply: {opens_at or '', closes_at or '', schedule version} now in
-- force. Every call makes a new version: a scheduler's config file never
-- publishes its schedule over it (publish_file.lua).
-- Clearing the opening of a pre-queue opens it: the next entry or tick
-- seals and draws it. (The values are validated by the caller.)
local fields = {CF_OPENS_AT, CF_CLOSES_AT}
for i = 1, 2 do
  if ARGV[i] == '-' then
    redis.call('HDEL', KEYS[1], fields[i])
  elseif ARGV[i] ~= '' then
    redis.call('HSET', KEYS[1], fields[i], ARGV[i])
  end
end
local version = redis.call('HINCRBY', KEYS[1], CF_SCHEDULE_VERSION, 1)
-- An idle lease holder ticks only when woken (docs/scheduler.md, *An idle
-- room*): woken now, it commits to the next draw's seed at once, before
-- anyone can pre-queue (docs/drop-day.md, *When the commitment is made*),
-- and a cleared opening's pre-queue is sealed at once.
redis.call('LPUSH', KEYS[2], 1)
redis.call('LTRIM', KEYS[2], 0, 0)
return {redis.call('HGET', KEYS[1], CF_OPENS_AT) or '', redis.call('HGET', KEYS[1], CF_CLOSES_AT) or '', version}
