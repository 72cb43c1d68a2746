# frozen_string_literal: true

require "sidekiq"
require "stagedrain"

module Stagedrain
  # Makes Sidekiq's own client stage jobs in Postgres instead of pushing them
  # to Redis:
  #
  #   # config/initializers/stagedrain.rb
  #   Stagedrain::Sidekiq.enable!
  #
  # Sidekiq still builds every job: normalize_item, strict_args!, the
  # sidekiq_options of the class, and the client middleware all run as usual;
  # only the last step, raw_push (the Redis write), becomes one INSERT of all
  # the payloads it was given. perform_async, perform_in/at, set(...),
  # Sidekiq::Client.push and push_bulk return the jid the worker will see.
  module Sidekiq
    # Payload keys that have a column of their own; the relay writes them back.
    COLUMN_KEYS = %w[class args queue jid at created_at enqueued_at].freeze

    class << self
      def enable!
        ::Sidekiq::Client.prepend(ClientStaging) unless ::Sidekiq::Client <= ClientStaging
        @enabled = true
      end

      # Back to pushing to Redis (for tests that need both).
      def disable!
        @enabled = false
      end

      def enabled?
        @enabled == true
      end

      # The row for one final Sidekiq payload, encoded with Sidekiq's own
      # JSON encoder.
      def row(payload)
        Row.new(
          queue: payload["queue"],
          job_class: payload["class"],
          args_json: ::Sidekiq.dump_json(payload["args"]),
          run_at: payload["at"] && Time.at(payload["at"]),
          options_json: ::Sidekiq.dump_json(options(payload)),
          created_at: Time.at(payload["created_at"]),
          jid: payload["jid"]
        )
      end
    end

    # The payload's other keys, and "activejob": false (which the relay
    # consumes): Sidekiq built the whole job, so a relay run with --format
    # activejob pushes it as it is too, rather than wrapping it for ActiveJob.
    def self.options(payload)
      payload.reject { |key, _| COLUMN_KEYS.include?(key) }.merge("activejob" => false)
    end

    # Prepended to Sidekiq::Client: raw_push receives the payloads exactly as
    # Sidekiq would write them to Redis (Sidekiq::Testing hooks the same step).
    module ClientStaging
      private

      def raw_push(payloads)
        return super unless Stagedrain::Sidekiq.enabled?

        Stager.insert(payloads.map { |payload| Stagedrain::Sidekiq.row(payload) })
        true
      end
    end
  end
end
