# frozen_string_literal: true

module Stagedrain
  # One staged_jobs row, its json columns already encoded by the framework's
  # own JSON encoder and stored as that text (so the relay pushes exactly what
  # the framework would have written to Redis). id is never part of it: it
  # must come from the column default, or a job could land below the relay's
  # cursor. A nil uuid leaves the column's default to choose one.
  Row = Struct.new(:queue, :job_class, :args_json, :run_at, :options_json, :created_at, :jid, :uuid,
                   keyword_init: true)

  class Row
    # What the jid column holds (its CHECK): Sidekiq's own form,
    # SecureRandom.hex(12). The relay's crash fence records jids in it.
    JID = /\A[0-9a-f]{24}\z/.freeze

    # Raises before the INSERT: a Postgres text column cannot hold U+0000,
    # and the failed statement would abort the caller's transaction with a
    # less clear error. args and options can: their JSON text spells it as
    # the six characters \u0000, which json keeps and every worker reads.
    def validate!
      {"queue" => queue, "job class" => job_class, "jid" => jid}.each do |what, text|
        raise ArgumentError, "stagedrain: the #{what} #{text.inspect} contains the NUL character" if text.to_s.include?("\0")
      end
      # Sidekiq::Client.push takes any "jid"; the column's CHECK would fail
      # the INSERT and abort the caller's transaction.
      unless jid.nil? || JID.match?(jid.to_s)
        raise ArgumentError, "stagedrain: jid #{jid.to_s[0, 64].inspect} is not 24 lowercase hex digits, the only " \
                             "jid staged_jobs holds; leave \"jid\" out (Sidekiq makes one) or pass SecureRandom.hex(12)"
      end
      self
    end
  end
end
