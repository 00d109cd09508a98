-- tollgate GCRA v6 (DESIGN §3, §11, §16): with calendar quotas and delays
-- A batch of requests, each decided all-or-nothing, in order, as if one after the other.
-- ARGV: now ("" = Redis TIME), the limits (count, then per limit: its kind (0 GCRA, 1 GCRA
-- shadowed, 2 quota, 3 quota shadowed), then T and burst of the short and the long tier and
-- the delay in ns a request may wait within and still be admitted (held by the gateway for
-- tat' - now - burst T), or for a quota its limit and four zeros), the requests (count, then per request: cost, groups,
-- and per group: its key's index in KEYS and its limit's index, and for a quota the end of its
-- window in Unix seconds and the milliseconds to it, both on the gateway's clock).
-- Reply: Redis's now (s, ns), then per request its verdict (0 rejected, 1 admitted, 2
-- admitted but a shadowed limit rejected) and per configured tier of each group tat - now in
-- ns, negative (-d - 1) when the tier rejected; past 2^53 ns as "allowed:s:ns"; per quota
-- group its count (negative, -n - 1, when it rejected) and its window's end (s).
-- A quota's key holds "q<window end> <count>" and expires at the window's end.
local B = 1000000000
local sub, tonumber, floor = string.sub, tonumber, math.floor
local argv, keys = ARGV, KEYS
local now_s, now_n
if argv[1] == '' then
  local t = redis.call('TIME')
  now_s, now_n = tonumber(t[1]), tonumber(t[2]) * 1000
else
  now_s, now_n = tonumber(sub(argv[1], 1, -10)) or 0, tonumber(sub(argv[1], -9))
end

-- Every key's tats, read once: st[4k-3..4k] = short s, ns, long s, ns; a quota's key: its
-- window's end qe[k] and count qc[k].
local st, qe, qc = {}, {}, {}
local vals = redis.call('MGET', unpack(keys))
for k = 1, #keys do
  local v, o = vals[k], 4 * k - 4
  st[o + 1], st[o + 2], st[o + 3], st[o + 4] = 0, 0, 0, 0
  if v and #v == 41 then
    st[o + 1], st[o + 2] = tonumber(sub(v, 1, 11)) or 0, tonumber(sub(v, 12, 20)) or 0
    st[o + 3], st[o + 4] = tonumber(sub(v, 22, 32)) or 0, tonumber(sub(v, 33, 41)) or 0
  elseif v and sub(v, 1, 1) == 'q' then
    local sp = string.find(v, ' ', 2, true)
    if sp then qe[k], qc[k] = tonumber(sub(v, 2, sp - 1)), tonumber(sub(v, sp + 1)) end
  end
end

-- Per limit l and tier t, at L[12 (2l - 2 + t) + 1 ...]: T in s and ns, burst, shadow, and
-- for the last cost seen (now is fixed for the batch): that cost, the cap now + burst T + D,
-- the limit now + (burst - c) T + D (a tat at most this admits), and c T; D is the limit's
-- delay, in s and ns at L[24 (l - 1) + 12] and L[24 l] (places the tiers leave unused).
-- A quota's limit in Q[l] (its tiers have burst 0, so the GCRA steps pass it by).
local L, Q = {}, {}
local nl = tonumber(argv[2])
for l = 1, nl do
  local a = 3 + 6 * (l - 1)
  local kind = argv[a]
  if kind == '2' or kind == '3' then Q[l] = tonumber(argv[a + 1]) end
  for t = 0, 1 do
    local x, T = 12 * (2 * l - 2 + t), tonumber(argv[a + 1 + 2 * t])
    if Q[l] then T = 0 end
    local ts = floor(T / B)
    L[x + 1], L[x + 2], L[x + 3], L[x + 4], L[x + 5] = ts, T - ts * B,
      Q[l] and 0 or tonumber(argv[a + 2 + 2 * t]), kind == '1' or kind == '3', 0
  end
  local D = Q[l] and 0 or tonumber(argv[a + 5])
  local ds = floor(D / B)
  L[24 * l - 12], L[24 * l] = ds, D - ds * B
end

local out = {now_s, now_n}
local o = 2
local dirty, qdirty, qms = {}, {}, {}
local p = {}  -- per group of the request: key, limit's base in L, the tats it would write
local pq = {}  -- per group: a quota (then p holds the window's end, the count, ms to the end)
local a = 4 + 6 * nl
for r = 1, tonumber(argv[3 + 6 * nl]) do
  local c, groups = tonumber(argv[a]), tonumber(argv[a + 1])
  a = a + 2
  o = o + 1
  local verdict = o
  local ok_e, ok_s = true, true
  for g = 1, groups do
    local k, l = tonumber(argv[a]), tonumber(argv[a + 1])
    a = a + 2
    local base, w = 4 * k - 4, 6 * g - 6
    p[w + 1], p[w + 2] = k, 24 * (l - 1)
    local q = Q[l]
    pq[g] = q ~= nil
    if q then
      -- The window the gateway asks for; a later one already stored (a replica whose clock
      -- runs ahead opened it) is joined with its count, an earlier one is over.
      local e, ms = tonumber(argv[a]), tonumber(argv[a + 1])
      a = a + 2
      local se, n = qe[k] or 0, qc[k] or 0
      if se > e then
        ms, e = ms + (se - e) * 1000, se
      elseif se < e then
        n = 0
      end
      local ok = n + c <= q
      if ok then
        n = n + c
      elseif L[p[w + 2] + 4] then
        ok_s = false
      else
        ok_e = false
      end
      p[w + 3], p[w + 4], p[w + 5] = e, n, ms
      if n > q then n = q end
      out[o + 1], out[o + 2] = ok and n or -n - 1, e
      o = o + 2
    end
    for t = 0, q and -1 or 1 do  -- a quota has no tiers
      local x = 24 * (l - 1) + 12 * t
      local ts, tn = st[base + 2 * t + 1], st[base + 2 * t + 2]
      p[w + 3 + 2 * t], p[w + 4 + 2 * t] = ts, tn
      local b = L[x + 3]
      if b > 0 then
        if L[x + 5] ~= c then
          local Ts, Tn = L[x + 1], L[x + 2]
          local Ds, Dn = L[24 * l - 12], L[24 * l]
          local y = Tn * b
          local q = floor(y / B)
          local s2, n2 = now_s + Ts * b + q + Ds, now_n + y - q * B + Dn
          while n2 >= B do s2, n2 = s2 + 1, n2 - B end
          L[x + 6], L[x + 7] = s2, n2
          y = Tn * (b - c)
          q = floor(y / B)
          s2, n2 = now_s + Ts * (b - c) + q + Ds, now_n + y - q * B + Dn
          while n2 >= B do s2, n2 = s2 + 1, n2 - B end
          L[x + 8], L[x + 9] = s2, n2
          y = Tn * c
          q = floor(y / B)
          L[x + 10], L[x + 11], L[x + 5] = Ts * c + q, y - q * B, c
        end
        -- tat = clamp(tat, now, now + burst T + D)
        if ts < now_s or (ts == now_s and tn < now_n) then ts, tn = now_s, now_n end
        if ts > L[x + 6] or (ts == L[x + 6] and tn > L[x + 7]) then ts, tn = L[x + 6], L[x + 7] end
        local ok = ts < L[x + 8] or (ts == L[x + 8] and tn <= L[x + 9])
        if ok then
          ts, tn = ts + L[x + 10], tn + L[x + 11]
          if tn >= B then ts, tn = ts + 1, tn - B end
          p[w + 3 + 2 * t], p[w + 4 + 2 * t] = ts, tn
        elseif L[x + 4] then
          ok_s = false
        else
          ok_e = false
        end
        ts, tn = ts - now_s, tn - now_n
        if tn < 0 then ts, tn = ts - 1, tn + B end
        o = o + 1
        if ts < 9000000 then
          local d = ts * B + tn
          out[o] = ok and d or -d - 1
        else
          out[o] = (ok and '1:' or '0:') .. string.format('%d:%d', ts, tn)
        end
      end
    end
  end
  if ok_e then
    out[verdict] = ok_s and 1 or 2
    for g = 1, groups do
      local w = 6 * g - 6
      if ok_s or not L[p[w + 2] + 4] then
        local k = p[w + 1]
        if pq[g] then
          qe[k], qc[k], qms[k] = p[w + 3], p[w + 4], p[w + 5]
          qdirty[k] = true
        else
          local base = 4 * k - 4
          st[base + 1], st[base + 2], st[base + 3], st[base + 4] = p[w + 3], p[w + 4], p[w + 5], p[w + 6]
          dirty[k] = true
        end
      end
    end
  else
    out[verdict] = 0
  end
end

-- Each key written once, expiring when its later tat passes.
for k in pairs(dirty) do
  local base = 4 * k - 4
  local s0, n0, s1, n1 = st[base + 1], st[base + 2], st[base + 3], st[base + 4]
  local xs, xn = s0, n0
  if s1 > xs or (s1 == xs and n1 > xn) then xs, xn = s1, n1 end
  redis.call('SET', keys[k], string.format('%011d%09d %011d%09d', s0, n0, s1, n1),
             'PXAT', xs * 1000 + math.ceil(xn / 1000000))
end
-- Each quota's key written once, expiring at its window's end: Redis's now plus the time the
-- gateway's clock has to run until then.
for k in pairs(qdirty) do
  redis.call('SET', keys[k], string.format('q%d %d', qe[k], qc[k]),
             'PXAT', now_s * 1000 + floor(now_n / 1000000) + qms[k])
end
return out
