# frozen_string_literal: true

# The Sidekiq 6.4 server of the end-to-end tests (stock Sidekiq running stock
# ActiveJob through Rails' Sidekiq adapter, as a Rails app's worker does):
#
#   REDIS_URL=... STAGEDRAIN_APP_PG_URL=... TEST_REDIS_URL=... \
#     sidekiq -r clients/ruby/test/e2e/worker.rb -q default -q mailers -q ordered -c 1 -t 5 -e test
require_relative "../support/app"

Sidekiq.configure_server do |config|
  config.redis = {url: ENV.fetch("TEST_REDIS_URL")}
  # Poll the schedule about every second, so delayed jobs run soon after due.
  config.average_scheduled_poll_interval = 1
  config.options[:poll_interval_average] = 1
  config.server_middleware do |chain|
    chain.add(Class.new do
      # Lets PlainJob record the job hash Sidekiq handed it.
      def call(_worker, item, _queue)
        Thread.current[:rb_item] = item
        yield
      ensure
        Thread.current[:rb_item] = nil
      end
    end)
  end
end

ActiveJob::Base.queue_adapter = :sidekiq
# What a Rails app's config.time_zone (default "UTC") sets; ActiveJob
# deserializes arguments in it, before switching to the job's own time zone.
Time.zone_default = Time.find_zone!("UTC")
