-- wrk script for the REST comparison: GET $BENCH_PATH with a bearer token.
-- relayd limits each user to 10 requests/s (burst 30), so the tokens rotate
-- over $BENCH_TOKENS (lines "user<TAB>token"), each thread taking its own
-- share; the pool is large enough that no request is refused. nginx gets the
-- very same requests (it ignores the header), so the client does the same
-- work on both sides. Requests are formatted once, in init().
local counter = 0

function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
end

function init(args)
  local nthreads = tonumber(os.getenv("BENCH_THREADS") or "2")
  local path = os.getenv("BENCH_PATH") or "/v1/me"
  requests_pool = {}
  local i = 0
  for line in io.lines(os.getenv("BENCH_TOKENS")) do
    if i % nthreads == tid then
      local tab = line:find("\t")
      local token = tab and line:sub(tab + 1) or line
      requests_pool[#requests_pool + 1] = wrk.format("GET", path, {["Authorization"] = "Bearer " .. token})
    end
    i = i + 1
  end
  next_index = 0
end

function request()
  next_index = next_index % #requests_pool + 1
  return requests_pool[next_index]
end

function done(summary, latency, requests)
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"bytes":%d,"non2xx":%d,"err_connect":%d,"err_read":%d,' ..
    '"err_write":%d,"err_timeout":%d,"lat_p50_us":%d,"lat_p99_us":%d,"lat_max_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, summary.errors.status, summary.errors.connect,
    summary.errors.read, summary.errors.write, summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
