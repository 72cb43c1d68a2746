/*
 * BullMQ's add, as the push script's procedure "bullmq.add": what BullMQ 6.7's
 * Queue.add does in Redis (its addStandardJob, addDelayedJob and
 * addPrioritizedJob scripts and their includes: storeJob, getDelayedScore,
 * getPriorityScore, isQueuePausedOrMaxed, the markers), for jobs that bring
 * their own ids. Written from reading them; numbers go to Redis as Lua numbers,
 * as BullMQ's do, so Redis spells them the same way.
 *
 * One command a queue (format_bullmq.c): its keys (wait, meta, events, marker,
 * delayed, prioritized, pc, active, paused), the job key prefix, then eight
 * values a job: id, name, data, opts, timestamp, delay, priority, lifo ("1"
 * or "0").
 *
 * A paused queue: 6.7 adds to wait with no marker. BullMQ 5.x's pause renamed
 * wait to paused, its add pushes to paused, and its resume renames paused
 * back over wait: so while a paused list exists the job goes there, which
 * both read (6.7's resume moves a paused list left by 5.x into wait).
 *
 * The keys' types and the counts BullMQ's own scripts read back (meta's
 * opts.maxLenEvents, the priority counter pc) are checked before any write;
 * the wait list's other readers' concurrency is read leniently (a value that
 * is not a number leaves the queue unmaxed). BullMQ also bumps the queue's id
 * counter on every add; these jobs never take a number from it, so it is left.
 */
#include "fmacros.h"

#include "format_bullmq.h"

const char format_bullmq_script[] =
	"local BQ_KEYS, BQ_VALUES = 10, 8\n"
	"local bq_max, bq_held = {}, {}\n"
	"local function bq_count(key, v, what)\n"
	"  if v and not (string.match(v, '^%-?%d+$') and #v <= 15) then refuse(key, what) end\n"
	"end\n"
	"local function bq_check(i, n)\n"
	"  local kinds = { 'list', 'hash', 'stream', 'zset', 'zset', 'zset', 'string', 'list', 'list' }\n"
	"  local have = {}\n"
	"  for k = 1, #kinds do have[k] = check_type(ARGV[i + k - 1], kinds[k]) end\n"
	"  local meta, pc = ARGV[i + 1], ARGV[i + 6]\n"
	"  if have[2] == 'hash' then\n"
	"    bq_count(meta, redis.call('HGET', meta, 'opts.maxLenEvents'), 'hash whose opts.maxLenEvents is not a count')\n"
	"  end\n"
	"  if have[7] == 'string' then bq_count(pc, redis.call('GET', pc), 'string that is not a count') end\n"
	"end\n"
	/* getOrSetMaxEvents, once a script for each queue. */
	"local function bq_events_max(meta)\n"
	"  if not bq_max[meta] then\n"
	"    local m = redis.call('HGET', meta, 'opts.maxLenEvents')\n"
	"    if not m then\n"
	"      m = 10000\n"
	"      redis.call('HSET', meta, 'opts.maxLenEvents', m)\n"
	"    end\n"
	"    bq_max[meta] = m\n"
	"  end\n"
	"  return bq_max[meta]\n"
	"end\n"
	/* isQueuePausedOrMaxed: a paused queue, or one at its concurrency, gets no marker. */
	"local function bq_paused_or_maxed(meta, active)\n"
	"  if bq_held[meta] == nil then\n"
	"    local a = redis.call('HMGET', meta, 'paused', 'concurrency')\n"
	"    local held = a[1] ~= false\n"
	"    if not held and a[2] then\n"
	"      local c, n = tonumber(a[2]), redis.call('LLEN', active)\n"
	"      held = c ~= nil and n >= c\n"
	"    end\n"
	"    bq_held[meta] = held\n"
	"  end\n"
	"  return bq_held[meta]\n"
	"end\n"
	/* getDelayedScore: the time in ms times 4096, plus the order among jobs due in that ms. */
	"local function bq_delayed_score(delayed, ts, delay)\n"
	"  local at = ts + delay\n"
	"  local min, max = at * 0x1000, (at + 1) * 0x1000 - 1\n"
	"  local r = redis.call('ZREVRANGEBYSCORE', delayed, max, min, 'WITHSCORES', 'LIMIT', 0, 1)\n"
	"  local top = tonumber(r[2])\n"
	"  if top == nil then return min, at end\n"
	"  if top >= max then return max, at end\n"
	"  return top + 1, at\n"
	"end\n"
	/* One job; what it adds to the queue's lists and markers goes in acc, which
	 * run writes once for the command: the same keys in the end, fewer calls. */
	"local function bq_add(k, j, acc)\n"
	"  local meta, events, delayed = ARGV[k + 1], ARGV[k + 2], ARGV[k + 4]\n"
	"  local id, name, data, opts = ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3]\n"
	"  local ts, delay, prio = tonumber(ARGV[j + 4]), tonumber(ARGV[j + 5]), tonumber(ARGV[j + 6])\n"
	"  local max, job = bq_events_max(meta), ARGV[k + 9] .. id\n"
	/* A custom id that exists is not added again (handleDuplicatedJob). */
	"  if redis.call('EXISTS', job) == 1 then\n"
	"    redis.call('XADD', events, 'MAXLEN', '~', max, '*', 'event', 'duplicated', 'jobId', id)\n"
	"    return\n"
	"  end\n"
	"  redis.call('HMSET', job, 'name', name, 'data', data, 'opts', opts, 'timestamp', ts, 'delay', delay,\n"
	"             'priority', prio)\n"
	"  redis.call('XADD', events, '*', 'event', 'added', 'jobId', id, 'name', name)\n"
	"  if delay > 0 then\n"
	"    local score, at = bq_delayed_score(delayed, ts, delay)\n"
	"    redis.call('ZADD', delayed, score, id)\n"
	"    redis.call('XADD', events, 'MAXLEN', '~', max, '*', 'event', 'delayed', 'jobId', id, 'delay', at)\n"
	"    acc.later = true\n"
	"    return\n"
	"  end\n"
	"  if prio ~= 0 then\n"
	"    local n = redis.call('INCR', ARGV[k + 6])\n"
	"    redis.call('ZADD', ARGV[k + 5], prio * 0x100000000 + n % 0x100000000, id)\n"
	"  else\n"
	"    local side = ARGV[j + 7] == '1' and acc.right or acc.left\n"
	"    side[#side + 1] = id\n"
	"  end\n"
	"  acc.now = true\n"
	"  redis.call('XADD', events, 'MAXLEN', '~', max, '*', 'event', 'waiting', 'jobId', id)\n"
	"end\n"
	/* The pushes (LPUSH a then LPUSH b is LPUSH a b; RPUSH, a lifo job's, the
	 * other end) and the markers: "0" wakes a worker now, "1" at the first
	 * delayed job (addDelayMarkerIfNeeded). */
	"local function bq_flush(k, acc)\n"
	"  local wait, meta, marker, delayed = ARGV[k], ARGV[k + 1], ARGV[k + 3], ARGV[k + 4]\n"
	"  local held = bq_paused_or_maxed(meta, ARGV[k + 7])\n"
	"  local list = wait\n"
	"  if held and redis.call('EXISTS', ARGV[k + 8]) == 1 then list = ARGV[k + 8] end\n"
	"  if #acc.left > 0 then redis.call('LPUSH', list, unpack(acc.left)) end\n"
	"  if #acc.right > 0 then redis.call('RPUSH', list, unpack(acc.right)) end\n"
	"  if acc.now and not held then redis.call('ZADD', marker, 0, '0') end\n"
	"  if acc.later then\n"
	"    local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')\n"
	"    if tonumber(first[2]) then redis.call('ZADD', marker, tonumber(first[2]) / 0x1000, '1') end\n"
	"  end\n"
	"end\n"
	"procs['bullmq.add'] = {\n"
	"  check = bq_check,\n"
	"  run = function(i, n)\n"
	"    local acc = { left = {}, right = {}, now = false, later = false }\n"
	"    for j = i + BQ_KEYS, i + n - 1, BQ_VALUES do bq_add(i, j, acc) end\n"
	"    bq_flush(i, acc)\n"
	"  end,\n"
	"}\n";
