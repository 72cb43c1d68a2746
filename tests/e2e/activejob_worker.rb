# frozen_string_literal: true
#
# stagedrain end-to-end test of --format activejob: the file a stock Sidekiq
# 6.4.1 server loads, with stock ActiveJob 6.1 on its Sidekiq adapter, as a
# Rails app's worker runs it (config.active_job.queue_adapter = :sidekiq):
#
#   REDIS_URL=redis://127.0.0.1:PORT/0 sidekiq -r /abs/tests/e2e/activejob_worker.rb \
#       -q default -q mailers -c 5 -t 5 -e test
#
# Every run is recorded in Redis, atomically (MULTI):
#   RPUSH   aj:ran  <json>  one entry per execution
#   HINCRBY aj:runs <id> 1  executions per ActiveJob job_id / Sidekiq jid
# <json> is JSON.generate of
#   {"kind","id","jid","class","queue","args","key_classes","arg_classes",
#    "locale","timezone","executions","ran_at"}
# where "args" are the arguments perform got, with every located GlobalID model
# written as {"located": <its gid>}, and "key_classes" the sorted classes of
# every Hash key met in them ("String": ActiveJob gave string keys back).
require "json"
require "sidekiq"
require "active_job"

Redis.silence_deprecations = true

url = ENV["REDIS_URL"]
abort "tests/e2e/activejob_worker.rb: REDIS_URL must be set" if url.nil? || url.empty?

Sidekiq.configure_server do |config|
  config.redis = {url: url}
  # Poll "schedule" about every second (see tests/e2e/worker.rb).
  config.average_scheduled_poll_interval = 1
  config.options[:poll_interval_average] = 1
end

Sidekiq.configure_client do |config|
  config.redis = {url: url}
end

ActiveJob::Base.queue_adapter = :sidekiq
ActiveJob::Base.logger = Logger.new(nil)

# A model GlobalID can find without a database: gid://stagedrain/StagedUser/<id>.
class StagedUser
  include GlobalID::Identification
  attr_reader :id

  def initialize(id)
    @id = id
  end
end
GlobalID.app = "stagedrain"
GlobalID::Locator.use(:stagedrain) { |gid| StagedUser.new(gid.model_id) }

module StagedrainAj
  RAN_LIST = "aj:ran"
  RUNS_HASH = "aj:runs"

  def self.plain(value, keys)
    case value
    when StagedUser then {"located" => value.to_global_id.to_s}
    when Array then value.map { |v| plain(v, keys) }
    when Hash
      value.each_with_object({}) do |(k, v), h|
        keys << k.class.name
        h[k.to_s] = plain(v, keys)
      end
    else value
    end
  end

  def self.record(rec)
    Sidekiq.redis do |conn|
      conn.multi do |tx|
        tx.rpush(RAN_LIST, JSON.generate(rec.merge("ran_at" => Time.now.to_f)))
        tx.hincrby(RUNS_HASH, rec["id"], 1)
      end
    end
  end
end

class ApplicationJob < ActiveJob::Base
end

class StagedAjJob < ApplicationJob
  def perform(*args)
    keys = []
    StagedrainAj.record(
      "kind" => "activejob", "id" => job_id, "jid" => provider_job_id, "class" => self.class.name,
      "queue" => queue_name, "args" => StagedrainAj.plain(args, keys), "key_classes" => keys.uniq.sort,
      "arg_classes" => args.map { |a| a.class.name }, "locale" => I18n.locale.to_s,
      "timezone" => Time.zone&.name, "executions" => executions
    )
  end
end

# The plain Sidekiq job a mixed relay pushes next to the ActiveJob ones.
class StagedPlainJob
  include Sidekiq::Worker

  def perform(*args)
    StagedrainAj.record("kind" => "sidekiq", "id" => jid, "jid" => jid, "class" => self.class.name, "args" => args)
  end
end
