# frozen_string_literal: true

require "active_record"
require "stagedrain/errors"

module Stagedrain
  # Writes rows into staged_jobs with one multi-row INSERT on the connection
  # Stagedrain::StagedJob uses (ActiveRecord::Base's unless the app points the
  # model elsewhere), so they join whatever transaction or savepoint the
  # caller has open: they commit with it and vanish with its rollback.
  module Stager
    COLUMNS = "queue, job_class, args, run_at, options, created_at, jid, uuid"
    # Parameter types are spelled out: in a multi-row VALUES list Postgres
    # types an untyped parameter as text, which a json column refuses. json,
    # not jsonb: the column keeps the encoder's text as it is.
    CASTS = %w[text text json timestamptz json timestamptz text].freeze
    # Postgres takes at most 65,535 parameters in one statement.
    ROWS_PER_STATEMENT = 1000

    module_function

    def insert(rows)
      return if rows.empty?

      rows.each(&:validate!)
      with_connection do |conn|
        if rows.size <= ROWS_PER_STATEMENT
          insert_slice(conn, rows)
        else
          # Several statements: all or nothing even outside a transaction.
          conn.transaction { rows.each_slice(ROWS_PER_STATEMENT) { |slice| insert_slice(conn, slice) } }
        end
      end
      nil
    end

    def insert_slice(conn, rows)
      binds = []
      values = rows.map do |row|
        fields = [row.queue, row.job_class, row.args_json, timestamp(row.run_at), row.options_json,
                  timestamp(row.created_at), row.jid]
        params = fields.zip(CASTS).map do |value, cast|
          binds << value
          "$#{binds.size}::#{cast}"
        end
        if row.uuid
          binds << row.uuid
          params << "$#{binds.size}::uuid"
        else
          params << "DEFAULT"
        end
        "(#{params.join(", ")})"
      end
      sql = "INSERT INTO #{conn.quote_table_name(StagedJob.table_name)} (#{COLUMNS}) VALUES #{values.join(", ")}"
      conn.exec_query(sql, "Stagedrain Insert", binds)
    rescue ActiveRecord::StatementInvalid => e
      raise NotMigrated.new(e.message, sql: e.sql, binds: e.binds) if missing_schema?(e.cause)

      raise
    end

    # An explicit UTC offset: a bare timestamp would be read in the session's
    # time zone, whatever that is.
    def timestamp(time)
      time&.utc&.iso8601(6)
    end

    def missing_schema?(cause)
      defined?(::PG::UndefinedTable) && (cause.is_a?(::PG::UndefinedTable) || cause.is_a?(::PG::UndefinedColumn))
    end

    # Rails 7.2 leases connections explicitly; with_connection hands back the
    # one a transaction in progress holds.
    def with_connection(&block)
      if StagedJob.respond_to?(:with_connection)
        StagedJob.with_connection(&block)
      else
        yield StagedJob.connection
      end
    end
  end
end
