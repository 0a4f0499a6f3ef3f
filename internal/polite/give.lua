-- Give a slot back and count the starts it served that Redis has not seen.
-- KEYS[1] slots; KEYS[2] state. ARGV: token, starts.
redis.call('ZREM', KEYS[1], ARGV[1])
local n = tonumber(ARGV[2])
if n > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local rate = tonumber(redis.call('HGET', KEYS[2], 'rate') or '0')
  local at = tonumber(redis.call('HGET', KEYS[2], 'rate_at') or tostring(now))
  rate = rate * math.exp(-(now - at) / 10000000) + n * 0.1
  redis.call('HSET', KEYS[2], 'rate', tostring(rate), 'rate_at', string.format('%.0f', now))
end
return 1
