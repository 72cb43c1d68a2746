# frozen_string_literal: true

# The application both sides load: the test (staging jobs) and the Sidekiq
# worker (running them). It connects as the LOGIN role `app`, a member of
# sql/roles.sql's group stagedrain_app, as a Rails app would.
require "json"
require "logger"
require "active_record"
require "active_job"
require "global_id"
require "sidekiq"
require_relative "describe"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

ActiveRecord::Base.establish_connection(ENV.fetch("STAGEDRAIN_APP_PG_URL"))
ActiveRecord::Base.logger = nil
# What globalid's Railtie does in a Rails app.
ActiveRecord::Base.include(GlobalID::Identification) unless ActiveRecord::Base < GlobalID::Identification
GlobalID.app = "stagedrain-test"
ActiveJob::Base.logger = Logger.new(nil)

Sidekiq.configure_client { |config| config.redis = {url: ENV.fetch("TEST_REDIS_URL")} }

# A real table (created by test/run) for GlobalID arguments.
class User < ActiveRecord::Base
  self.table_name = "rb_users"
end

require_relative "jobs"
