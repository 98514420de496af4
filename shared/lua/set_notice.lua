-- set_notice: the operator sets or clears the notice to the line.
-- KEYS[1] config
-- ARGV[1] the default text, already checked (shared/src/notice.rs); '' clears the notice
-- ARGV[2] its texts per language, a JSON object already checked and encoded
--         (notice::encode_texts); '' for none
-- Reply: {the default text before or '', the texts before or ''}.
-- Both fields change together: a notice never keeps another's translations.
-- The edge reads them with its snapshot and shows them on every reply.
local before = redis.call('HMGET', KEYS[1], CF_NOTICE, CF_NOTICE_TEXTS)
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], CF_NOTICE, CF_NOTICE_TEXTS)
else
  redis.call('HSET', KEYS[1], CF_NOTICE, ARGV[1])
  if ARGV[2] == '' then
    redis.call('HDEL', KEYS[1], CF_NOTICE_TEXTS)
  else
    redis.call('HSET', KEYS[1], CF_NOTICE_TEXTS, ARGV[2])
  end
end
return {before[1] or '', before[2] or ''}
