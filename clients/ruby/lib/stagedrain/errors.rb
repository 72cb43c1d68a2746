# frozen_string_literal: true

require "active_record"

module Stagedrain
  # The staged_jobs table (or one of its columns) is missing from the database
  # the app stages into. A StatementInvalid still, so code that rescues
  # ActiveRecord's errors keeps doing so; the message says what to run.
  class NotMigrated < ActiveRecord::StatementInvalid
    def initialize(cause_message = nil, **kwargs)
      super("stagedrain: the staged_jobs table is missing or outdated in this database; " \
            "run `stagedrain migrate --pg-url ...` (#{cause_message.to_s.strip.lines.first&.strip})", **kwargs)
    end
  end
end
