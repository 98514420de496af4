-- publish_file: the lease holder publishes its config file: the file's
-- settings and their fingerprint (what a standby compares its own file
-- with), and the file's schedule, which never goes over a newer one.
-- KEYS[1] config  KEYS[2] lock
-- ARGV[1] owner (only the lease holder publishes)
-- ARGV[2] the file's fingerprint  ARGV[3] its settings (JSON)
-- ARGV[4] 'first': a new holder; publishes only where nothing is
--   published yet (a new deployment, or Redis restarted empty), so a
--   standby never replaces the running file, nor a schedule written since
--   · 'reload': this holder's file was reloaded (SIGHUP): it replaces
--   the published file, and its schedule times given here
-- ARGV[5] opens_at epoch ms  ARGV[6] closes_at ('' the file sets none,
--   or, on a reload, did not change it)
-- Reply: {code, fingerprint in force, file settings in force (JSON),
--   opening kept ('1': the file's opening had passed and a future one
--   was published: kept), schedule version}
--   code 0 not the lease holder (nothing written) · 1 this file is
--   published · 2 another file is published (kept)
local function reply(code, kept)
  local f = read_fields(KEYS[1], CF_FILE_FINGERPRINT, CF_FILE_SETTINGS, CF_SCHEDULE_VERSION)
  return {code, f[CF_FILE_FINGERPRINT] or '', f[CF_FILE_SETTINGS] or '', kept, f[CF_SCHEDULE_VERSION] or '0'}
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return reply(0, '') end
local published = redis.call('HGET', KEYS[1], CF_FILE_FINGERPRINT)
local first = ARGV[4] == 'first'
if first and published and published ~= ARGV[2] then return reply(2, '') end
redis.call('HSET', KEYS[1], CF_FILE_FINGERPRINT, ARGV[2], CF_FILE_SETTINGS, ARGV[3])
-- A schedule written before (by an operator, another file, or a version
-- without schedule_version) is newer than a file taking over.
local written = read_fields(KEYS[1], CF_SCHEDULE_VERSION, CF_OPENS_AT, CF_CLOSES_AT)
if first and (written[CF_SCHEDULE_VERSION] or written[CF_OPENS_AT] or written[CF_CLOSES_AT]) then
  return reply(1, '')
end
local opens, closes, kept = tonumber(ARGV[5]), tonumber(ARGV[6]), ''
local now_open = tonumber(redis.call('HGET', KEYS[1], CF_OPENS_AT) or '')
local now = now_ms()
if opens and now_open and opens < now and now_open > now then
  -- An opening already past would open a postponed drop at once.
  opens, kept = nil, '1'
end
if opens then redis.call('HSET', KEYS[1], CF_OPENS_AT, opens) end
if closes then redis.call('HSET', KEYS[1], CF_CLOSES_AT, closes) end
if opens or closes or first then redis.call('HINCRBY', KEYS[1], CF_SCHEDULE_VERSION, 1) end
return reply(1, kept)
