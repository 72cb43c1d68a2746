# frozen_string_literal: true
#
# stagedrain end-to-end test: the file a stock Sidekiq 6.4.1 server loads with
#
#   REDIS_URL=redis://127.0.0.1:PORT/0 sidekiq -r /abs/path/tests/e2e/worker.rb \
#       -q critical -q default -c 5 -t 5 -e test
#
# Each executed StagedrainE2eJob is recorded in Redis, atomically (MULTI):
#   RPUSH   e2e:ran  <json>   one entry per execution, in execution order
#   HINCRBY e2e:runs <jid> 1  execution count per jid (exactly-once => all 1)
# <json> is JSON.generate (compact, no spaces) of
#   {"jid","class","queue","args","retry","created_at","enqueued_at","ran_at","pid"}
# (with E2E_SHARD set, also "shard": its value), where "queue" is the queue the job was fetched from, "args" the array the job
# was called with and created_at/enqueued_at are copied unchanged from the payload
# (enqueued_at is set by Sidekiq itself for jobs that came through "schedule").
require "json"
require "sidekiq"

# Debian pairs sidekiq 6.4.1 with redis-rb 4.8, which prints a deprecation
# warning to stderr for every BRPOP (each processor, every 2 s). Mute it.
Redis.silence_deprecations = true

url = ENV["REDIS_URL"]
if url.nil? || url.empty?
  # Without this Sidekiq would silently fall back to redis://localhost:6379.
  abort "tests/e2e/worker.rb: REDIS_URL must be set (e.g. redis://127.0.0.1:6390/0)"
end

module StagedrainE2e
  RAN_LIST = "e2e:ran"
  RUNS_HASH = "e2e:runs"
  # E2E_RECORD_URL: record into that Redis instead of the one the jobs come
  # from (several shards' workers into one list; a shard's Redis may be down).
  RECORDER = ENV["E2E_RECORD_URL"] ? Redis.new(url: ENV["E2E_RECORD_URL"]) : nil

  # Server middleware: exposes the job hash (queue, created_at, ...) to perform.
  class CaptureJob
    def call(_worker, job, queue)
      Thread.current[:stagedrain_e2e_job] = job
      Thread.current[:stagedrain_e2e_queue] = queue
      yield
    ensure
      Thread.current[:stagedrain_e2e_job] = nil
      Thread.current[:stagedrain_e2e_queue] = nil
    end
  end
end

Sidekiq.configure_server do |config|
  config.redis = {url: url}
  # Poll "schedule"/"retry" about every second (uniform 0.5..1.5 s). Setting
  # :poll_interval_average (not just average_scheduled_poll_interval) also drops
  # the poller's fixed 10 s start-up delay; a random 0..5 s one remains.
  config.average_scheduled_poll_interval = 1
  config.options[:poll_interval_average] = 1
  config.server_middleware { |chain| chain.add StagedrainE2e::CaptureJob }
end

Sidekiq.configure_client do |config|
  config.redis = {url: url}
end

class StagedrainE2eJob
  include Sidekiq::Worker

  # Accept any arity so an args-shape mismatch is recorded, not raised.
  def perform(*args)
    job = Thread.current[:stagedrain_e2e_job] || {}
    rec = {
      "jid" => jid,
      "class" => job["class"],
      "queue" => Thread.current[:stagedrain_e2e_queue],
      "args" => args,
      "retry" => job["retry"],
      "created_at" => job["created_at"],
      "enqueued_at" => job["enqueued_at"],
      "ran_at" => Time.now.to_f,
      "pid" => Process.pid
    }
    rec["shard"] = ENV["E2E_SHARD"] if ENV["E2E_SHARD"]
    record = lambda do |conn|
      conn.multi do |tx|
        tx.rpush(StagedrainE2e::RAN_LIST, JSON.generate(rec))
        tx.hincrby(StagedrainE2e::RUNS_HASH, jid, 1)
      end
    end
    if StagedrainE2e::RECORDER
      record.call(StagedrainE2e::RECORDER)
    else
      Sidekiq.redis(&record)
    end
  end
end
