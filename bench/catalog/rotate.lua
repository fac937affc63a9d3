-- wrk script: requests the paths listed in the file named by PATHS_FILE, one
-- after the other, so that every request reads a different entity or query.
local paths = {}
for line in io.lines(os.getenv("PATHS_FILE")) do
    paths[#paths + 1] = line
end
local counter = math.random(#paths)

request = function()
    counter = counter % #paths + 1
    return wrk.format("GET", paths[counter])
end

done = function(summary, latency, requests)
    local errors = summary.errors
    io.write(string.format("bench: requests=%d non2xx=%d socket_errors=%d\n", summary.requests,
        summary.errors.status, errors.connect + errors.read + errors.write + errors.timeout))
end
