# frozen_string_literal: true

require "json"
require "securerandom"
require "active_job"
require "stagedrain"

module ActiveJob
  module QueueAdapters
    # == stagedrain adapter for Active Job
    #
    # Stages each job as a row in staged_jobs inside the app's current
    # transaction; the stagedrain relay later pushes it to Redis exactly as
    # Rails' Sidekiq adapter would, for a stock Sidekiq worker to run.
    #
    #   Rails.application.config.active_job.queue_adapter = :stagedrain
    #
    # The payload is ActiveJob's own +serialize+: arguments, GlobalIDs,
    # locale, time zone and priority are encoded by Rails, not by stagedrain.
    class StagedrainAdapter
      ROW_OPTIONS = JSON.generate("activejob" => true, "serialized" => true).freeze
      UUID = /\A\h{8}-\h{4}-\h{4}-\h{4}-\h{12}\z/.freeze

      # Rails 7.2 defers enqueueing to after commit for adapters that say so.
      # Staging is the point of this adapter: the row must be written in the
      # transaction, so it commits and rolls back with the app's data.
      def enqueue_after_transaction_commit?
        false
      end

      def enqueue(job) # :nodoc:
        stage([job]) { nil }
        job.provider_job_id
      end

      def enqueue_at(job, timestamp) # :nodoc:
        stage([job]) { timestamp }
        job.provider_job_id
      end

      # Rails 7.1's ActiveJob.perform_all_later: every job in one INSERT.
      # Returns how many were staged, as Rails expects.
      def enqueue_all(jobs) # :nodoc:
        stage(jobs, &:scheduled_at)
        jobs.each { |j| j.successfully_enqueued = true if j.respond_to?(:successfully_enqueued=) }
        jobs.size
      end

      private

      # Builds every row first (a job ActiveJob cannot serialize raises here,
      # before anything is written), then inserts them together; the block
      # gives a job's scheduled time or nil. On failure the jobs get back the
      # provider_job_id they had.
      def stage(jobs)
        previous = jobs.map(&:provider_job_id)
        rows = jobs.map { |job| row(job, yield(job)) }
        Stagedrain::Stager.insert(rows)
      rescue StandardError
        jobs.zip(previous) { |job, id| job.provider_job_id = id }
        raise
      end

      # provider_job_id is the Sidekiq jid the worker will see; it is set
      # before serialize so the payload and the caller agree on it.
      def row(job, scheduled)
        job.provider_job_id = SecureRandom.hex(12)
        Stagedrain::Row.new(
          queue: job.queue_name.to_s,
          job_class: job.class.name,
          args_json: JSON.generate([job.serialize]),
          run_at: scheduled && run_at(scheduled),
          options_json: ROW_OPTIONS,
          created_at: Time.now,
          jid: job.provider_job_id,
          # A job_id the app set to something else than a UUID stays in the
          # payload; the column then takes its default.
          uuid: UUID.match?(job.job_id.to_s) ? job.job_id : nil
        )
      end

      # enqueue_at gets a Float (epoch seconds); Rails 7.1's scheduled_at is a Time.
      def run_at(scheduled)
        scheduled.is_a?(Numeric) ? Time.at(scheduled) : scheduled.to_time
      end
    end
  end
end
