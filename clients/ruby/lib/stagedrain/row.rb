# frozen_string_literal: true

module Stagedrain
  # One staged_jobs row, its jsonb columns already encoded by the framework's
  # own JSON encoder (so the relay receives exactly what the framework would
  # have written to Redis). id is never part of it: it must come from the
  # column default, or a job could land below the relay's cursor. A nil uuid
  # leaves the column's default to choose one.
  Row = Struct.new(:queue, :job_class, :args_json, :run_at, :options_json, :created_at, :jid, :uuid,
                   keyword_init: true)

  class Row
    # JSON escapes NUL as \u0000; the backslashes before it must be an even
    # run, or the text was a literal backslash followed by "u0000".
    NUL_ESCAPE = /(?<!\\)(?:\\\\)*\\u0000/.freeze
    # What the jid column holds (its CHECK): Sidekiq's own form,
    # SecureRandom.hex(12). The relay's crash fence records jids in it.
    JID = /\A[0-9a-f]{24}\z/.freeze

    # Raises before the INSERT: Postgres text and jsonb cannot hold U+0000,
    # and the failed statement would abort the caller's transaction with a
    # less clear error.
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
      [args_json, options_json].each do |json|
        next unless json.match?(NUL_ESCAPE)

        raise ArgumentError, "stagedrain: a #{job_class} job argument or option contains the NUL character " \
                             "(\\u0000), which Postgres jsonb cannot store; encode it (e.g. Base64) before enqueueing"
      end
      self
    end
  end
end
