-- tollgate GCRA refund v1 (DESIGN §11)
local B = 1000000000
local sub, tonumber = string.sub, tonumber
local t = redis.call('TIME')
local now_s, now_n = tonumber(t[1]), tonumber(t[2]) * 1000
for g = 1, #KEYS do
  local v = redis.call('GET', KEYS[g])
  if v and #v == 41 then
    local st = {tonumber(sub(v, 1, 11)) or 0, tonumber(sub(v, 12, 20)) or 0,
                tonumber(sub(v, 22, 32)) or 0, tonumber(sub(v, 33, 41)) or 0}
    for tier = 0, 1 do
      local b = (g - 1) * 8 + tier * 4
      local es, en = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
      local ws, wn = tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
      -- r = min(c T, max(0, tat_written - now))
      local rs, rn = ws - now_s, wn - now_n
      if rn < 0 then rs, rn = rs - 1, rn + B end
      if rs < 0 then rs, rn = 0, 0 end
      if rs > es or (rs == es and rn > en) then rs, rn = es, en end
      local ts, tn = st[2 * tier + 1] - rs, st[2 * tier + 2] - rn
      if tn < 0 then ts, tn = ts - 1, tn + B end
      if ts < 0 then ts, tn = 0, 0 end
      st[2 * tier + 1], st[2 * tier + 2] = ts, tn
    end
    local xs, xn = st[1], st[2]
    if st[3] > xs or (st[3] == xs and st[4] > xn) then xs, xn = st[3], st[4] end
    if xs < now_s or (xs == now_s and xn <= now_n) then
      redis.call('DEL', KEYS[g])
    else
      redis.call('SET', KEYS[g], string.format('%011d%09d %011d%09d', st[1], st[2], st[3], st[4]),
                 'PXAT', xs * 1000 + math.ceil(xn / 1000000))
    end
  end
end
return 1
