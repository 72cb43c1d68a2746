# frozen_string_literal: true

require_relative "../support/helper"
require_relative "../support/databases"
require "stagedrain/schema"

# Stagedrain::Schema.migrate against fresh databases, compared with what the
# relay's `stagedrain migrate` makes: the same tables, the same ledger, and
# neither applies a file twice, in either order.
class SchemaTest < Minitest::Test
  LATEST = "008_leader"
  ALL = %w[001_staged_jobs 002_cursor 003_dead_letter_key 004_job_uuid 005_tenants_and_held 006_routes
           007_json_payload 008_leader].freeze

  # An ActiveRecord connection of its own to a database, apart from the app's.
  def connect(name)
    klass = Class.new(ActiveRecord::Base) { self.abstract_class = true }
    # Pools are keyed by the class's name: one name per connection.
    Object.const_set("SchemaDB#{SecureRandom.hex(4)}", klass)
    klass.establish_connection(Databases.url(name))
    (@pools ||= []) << klass
    klass.connection
  end

  def teardown
    (@pools || []).each(&:remove_connection)
  end

  def exists?(conn, table)
    !conn.select_value("SELECT to_regclass(#{conn.quote(table)})::text").nil?
  end

  def test_the_gem_has_the_repositorys_migration_files_and_no_others
    repo = File.expand_path("../../../../sql", __dir__)
    assert_equal File.realpath(repo), File.realpath(Stagedrain::Schema::DIR), "sql/ is the repository's, by a link"
    assert_equal Dir.children(repo).grep(/\A\d{3}_[a-z0-9_]+\.sql\z/).sort.map { |f| f.delete_suffix(".sql") },
                 Stagedrain::Schema.files.keys
    assert_equal ALL, Stagedrain::Schema.files.keys, "roles.sql, notify.sql and embed.sh are not migrations"
    assert_equal LATEST, Stagedrain::Schema.latest
  end

  def test_migrate_then_the_relays_migrate_changes_nothing
    db = Databases.create
    assert_equal ALL, Stagedrain::Schema.migrate(connect(db), through: LATEST)
    assert_equal Databases.reference_schema, Databases.schema(db)
    before = Databases.ledger(db)

    log = Databases.relay_migrate(db)
    assert_equal 8, log.scan("migration already applied").size, log
    refute_match(/msg="migration applied"/, log)
    assert_equal before, Databases.ledger(db), "the relay applied nothing again"
  end

  def test_the_relays_migrate_then_migrate_changes_nothing
    db = Databases.create
    Databases.relay_migrate(db)
    before = Databases.ledger(db)

    assert_equal [], Stagedrain::Schema.migrate(connect(db), through: LATEST)
    assert_equal before, Databases.ledger(db)
    assert_equal Databases.reference_schema, Databases.schema(db)
  end

  # A later schema change is one more migration naming a later file.
  def test_through_applies_up_to_the_named_file_and_a_later_call_the_rest
    db = Databases.create
    conn = connect(db)
    assert_equal ALL.first(3), Stagedrain::Schema.migrate(conn, through: "003_dead_letter_key")
    refute exists?(conn, "staged_jobs_held"), "005 is not applied yet"
    assert_equal ALL.drop(3), Stagedrain::Schema.migrate(conn, through: LATEST)
    assert_equal Databases.reference_schema, Databases.schema(db)
  end

  def test_an_unknown_name_is_refused_before_anything_is_made
    db = Databases.create
    conn = connect(db)
    err = assert_raises(Stagedrain::Schema::Error) { Stagedrain::Schema.migrate(conn, through: "009_later") }
    assert_match(/no migration named "009_later" .*this gem has 001_staged_jobs \.\. 008_leader/, err.message)
    assert_raises(Stagedrain::Schema::Error) { Stagedrain::Schema.migrate(conn, through: "roles") }
    refute exists?(conn, "stagedrain_migrations")
  end

  # Inside a Rails migration the files join its transaction: a rollback
  # leaves neither the tables nor the ledger's rows.
  def test_it_joins_the_callers_transaction
    db = Databases.create
    conn = connect(db)
    conn.transaction do
      Stagedrain::Schema.migrate(conn, through: LATEST)
      raise ActiveRecord::Rollback
    end
    refute exists?(conn, "staged_jobs")
    refute exists?(conn, "stagedrain_migrations")
  end

  # Two at once, in the worst order: the second waits on the advisory lock
  # while the first has applied everything but not committed, then finds
  # the files recorded and applies none.
  def test_a_second_migrate_waits_for_the_first_and_applies_nothing
    db = Databases.create
    first = connect(db)
    second = connect(db)
    pid = second.select_value("SELECT pg_backend_pid()")
    first.transaction do
      Stagedrain::Schema.migrate(first, through: LATEST)
      waiter = Thread.new { Stagedrain::Schema.migrate(second, through: LATEST) }
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
      until first.select_value("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = #{pid}")
        flunk "the second migrate never waited on the lock" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        sleep 0.02
      end
      @waiter = waiter
    end
    assert_equal [], @waiter.value
    assert_equal ALL, Databases.ledger(db).keys
  end
end
