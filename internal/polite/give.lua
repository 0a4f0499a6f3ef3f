-- Give a slot back and count the starts it served that Redis has not seen.
-- KEYS[1] slots; KEYS[2] state. ARGV: token, starts.
redis.call('ZREM', KEYS[1], ARGV[1])
local n = tonumber(ARGV[2])
if n > 0 then
  -- A take wrote rate_at; a state that has none has expired and is not made anew here.
  local seen = redis.call('HMGET', KEYS[2], 'rate', 'rate_at')
  if seen[2] then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local rate = tonumber(seen[1] or '0') * math.exp(-(now - tonumber(seen[2])) / 10000000) + n * 0.1
    redis.call('HSET', KEYS[2], 'rate', tostring(rate), 'rate_at', string.format('%.0f', now))
  end
end
return 1
