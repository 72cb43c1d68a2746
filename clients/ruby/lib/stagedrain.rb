# frozen_string_literal: true

require "active_support"
require "stagedrain/version"
require "stagedrain/errors"
require "stagedrain/row"
require "stagedrain/stager"

# Stage background jobs in Postgres, in the app's own transaction, for the
# stagedrain relay to push to Redis once they commit. See README.md.
module Stagedrain
  # Loaded on first use: defining an ActiveRecord model at require time would
  # load ActiveRecord::Base before a Rails app has configured it.
  autoload :StagedJob, "stagedrain/staged_job"
  # Only for apps that use Sidekiq; `require "stagedrain/sidekiq"` also works.
  autoload :Sidekiq, "stagedrain/sidekiq"
  # The relay's tables through a Rails migration or schema.rb.
  autoload :Schema, "stagedrain/schema"
  # `rails stagedrain:status`.
  autoload :Status, "stagedrain/status"
end

# In a Rails app: the schema dump hooks and the rake task.
require "stagedrain/railtie" if defined?(Rails::Railtie)

# `queue_adapter = :stagedrain` looks the adapter up as a constant when it is
# set; have it defined by then, without loading ActiveJob for apps that do not
# use it.
ActiveSupport.on_load(:active_job) { require "active_job/queue_adapters/stagedrain_adapter" }
