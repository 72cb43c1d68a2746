# frozen_string_literal: true

# The job classes the tests stage and the worker runs. Every run is recorded
# in Redis atomically: RPUSH rb:ran <json> and HINCRBY rb:runs <id> 1, id being
# ActiveJob's job_id or Sidekiq's jid; ordered jobs also RPUSH their index to
# rb:order:<tag>.
module Recorder
  RAN = "rb:ran"
  RUNS = "rb:runs"

  def self.record(id, fields, order: nil)
    rec = fields.merge("id" => id, "ran_at" => Time.now.to_f)
    Sidekiq.redis do |conn|
      conn.multi do |tx|
        tx.rpush(RAN, JSON.generate(rec))
        tx.hincrby(RUNS, id, 1)
        tx.rpush("rb:order:#{order[0]}", order[1]) if order
      end
    end
  end
end

# Every argument type ActiveJob serializes, positional and keyword.
class TypedJob < ActiveJob::Base
  def perform(*args, **kwargs)
    Recorder.record(job_id, {"kind" => "activejob", "jid" => provider_job_id, "queue" => queue_name,
                             "priority" => priority, "zone" => Time.zone&.name,
                             "args" => Describe.call(args), "kwargs" => Describe.call(kwargs)})
  end
end

class OrderedJob < ActiveJob::Base
  queue_as :ordered

  def perform(tag, index)
    Recorder.record(job_id, {"kind" => "activejob", "jid" => provider_job_id}, order: [tag, index])
  end
end

class PlainJob
  include Sidekiq::Job

  def perform(*args)
    item = Thread.current[:rb_item]
    Recorder.record(jid, {"kind" => "sidekiq", "jid" => jid, "queue" => item["queue"], "item" => item, "args" => args})
  end
end

class OrderedPlainJob
  include Sidekiq::Job
  sidekiq_options queue: "ordered"

  def perform(tag, index)
    Recorder.record(jid, {"kind" => "sidekiq", "jid" => jid}, order: [tag, index])
  end
end
