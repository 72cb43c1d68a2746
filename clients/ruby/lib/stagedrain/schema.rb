# frozen_string_literal: true

module Stagedrain
  # The relay's tables, made from the very SQL files `stagedrain migrate`
  # applies (the gem's sql/, a link to the repository's sql/) and in the same
  # way (relay/migrate.c): under one advisory lock, each file once, in name
  # order, recorded in stagedrain_migrations. So the relay and a Rails
  # migration, run in either order, never apply a file twice. A Rails
  # migration (`rails g stagedrain:install`) and db/schema.rb both call
  # migrate.
  module Schema
    DIR = File.expand_path("../../sql", __dir__)
    # A migration's file; roles.sql, notify.sql and embed.sh are not ones.
    FILE = /\A[0-9]{3}_[a-z0-9_]+\.sql\z/.freeze
    # What the migrations make; schema.rb calls migrate instead of dumping them.
    TABLES = %w[staged_jobs staged_jobs_dead staged_jobs_held staged_jobs_leader stagedrain_migrations].freeze
    LOCK = "SELECT pg_advisory_xact_lock(hashtext('stagedrain migrate'))"
    LEDGER = "CREATE TABLE IF NOT EXISTS stagedrain_migrations " \
             "(name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"

    module_function

    # Every migration this gem has, name (the file's, without .sql) => path,
    # in the order they apply.
    def files
      names = Dir.exist?(DIR) ? Dir.children(DIR).grep(FILE).sort : []
      names.to_h { |f| [File.basename(f, ".sql"), File.join(DIR, f)] }
    end

    # The name of the newest migration this gem has.
    def latest
      files.keys.last or raise Error, "stagedrain: no migrations in #{DIR} (its sql/ link to the repository's sql/ is broken)"
    end

    # Applies, inside the connection's open transaction (a Rails migration's)
    # or else a transaction of its own, every migration up to and including
    # through that stagedrain_migrations does not record yet. Returns the
    # names it applied. A later schema change is one more call, with a later
    # through.
    def migrate(connection, through:)
      wanted = upto(through)
      connection.transaction do
        connection.execute(LOCK, "Stagedrain Migrate")
        connection.execute(LEDGER, "Stagedrain Migrate")
        done = connection.select_values("SELECT name FROM stagedrain_migrations", "Stagedrain Migrate")
        wanted.reject { |name, _| done.include?(name) }.map do |name, path|
          connection.execute(File.read(path), "Stagedrain Migrate #{name}")
          connection.execute("INSERT INTO stagedrain_migrations (name) VALUES (#{connection.quote(name)})",
                             "Stagedrain Migrate")
          name
        end
      end
    end

    # The migrations up to and including through, or an error naming those
    # this gem has (a schema written by a newer gem or relay names one this
    # gem lacks).
    def upto(through)
      all = files
      names = all.keys
      at = names.index(through.to_s)
      unless at
        have = names.empty? ? "none" : "#{names.first} .. #{names.last}"
        raise Error, "stagedrain: no migration named #{through.to_s.inspect} in #{DIR} (this gem has #{have}); " \
                     "name one of them, or update the stagedrain gem"
      end
      all.first(at + 1)
    end

    # The newest migration a database records, or nil if it has none (it never
    # ran `stagedrain migrate` nor this gem's migration).
    def applied_through(connection)
      return nil unless connection.table_exists?("stagedrain_migrations")

      connection.select_value("SELECT max(name) FROM stagedrain_migrations", "Stagedrain Schema")
    end

    class Error < ArgumentError; end
  end
end
