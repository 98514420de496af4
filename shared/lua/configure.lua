-- configure: publish a queue's effective settings.
-- KEYS[1] config
-- ARGV[1] initial state (used only if the queue has none yet)
-- ARGV[2..] pairs: setting name, value
-- Reply: the queue state now in force.
-- The operator's state (open/paused/draining/closed) is never overwritten
-- here: a restarting scheduler must not reopen a queue someone closed.
-- A liveness window that changes (abandon_after_ms, or the sleep grace in
-- force) keeps the old one in force in `seen_prev` / `grace_prev`
-- (`window|until,…`; prelude seen.windows) for 1.25 times its length plus
-- LIVENESS_MARGIN (the oldest snapshot the edge answers from, which may
-- still hold the old window): a visitor who polled within the window in
-- force before the change is never dropped by it, whether the change
-- came at run time, on a reload or with a new lease holder
-- (docs/engine.md, *Changing the windows*).
local now = now_ms()
local before = read_fields(KEYS[1], CF_ABANDON_AFTER_MS, CF_SLEEP_GRACE_MS, CF_SEEN_PREV, CF_GRACE_PREV)
if #ARGV > 1 then redis.call('HSET', KEYS[1], unpack(ARGV, 2)) end
local after = read_fields(KEYS[1], CF_ABANDON_AFTER_MS, CF_SLEEP_GRACE_MS)

-- The earlier windows of one family still in force, with `old` added when
-- it gives way to `new` (each window once, at its latest end; the new
-- one's own entry goes: it is marked and read anyway).
local function kept(field, old, new)
  local ends, order = {}, {}
  for w, till in string.gmatch(before[field] or '', '(%d+)' .. SEP .. '(%d+)') do
    w, till = tonumber(w), tonumber(till)
    if till > now and w ~= new then
      if not ends[w] then order[#order + 1] = w end
      ends[w] = math.max(ends[w] or 0, till)
    end
  end
  if old and old ~= new then
    if not ends[old] then order[#order + 1] = old end
    ends[old] = math.max(ends[old] or 0, now + old + math.ceil(old / 4) + LIVENESS_MARGIN)
  end
  local list = {}
  for _, w in ipairs(order) do list[#list + 1] = w .. SEP .. ends[w] end
  if #list == 0 then
    if before[field] then redis.call('HDEL', KEYS[1], field) end
  else
    local joined = table.concat(list, ',')
    redis.call('HSET', KEYS[1], field, joined)
  end
end
kept(CF_SEEN_PREV, tonumber(before[CF_ABANDON_AFTER_MS] or ''), tonumber(after[CF_ABANDON_AFTER_MS] or ''))
kept(CF_GRACE_PREV, seen.grace(before), seen.grace(after))

redis.call('HSETNX', KEYS[1], CF_STATE, ARGV[1])
return redis.call('HGET', KEYS[1], CF_STATE)
