# frozen_string_literal: true

require_relative "../support/rails_app"

# The generated migration, db/schema.rb and db/structure.sql against fresh
# databases, each compared with what `stagedrain migrate` makes.
class MigrationsTest < Minitest::Test
  ALL = %w[001_staged_jobs 002_cursor 003_dead_letter_key 004_job_uuid 005_tenants_and_held 006_routes
           007_json_payload 008_leader].freeze

  def test_rails_db_migrate_then_stagedrain_migrate_changes_nothing
    db = RailsApp.migrated_db
    assert_equal Databases.reference_schema, Databases.schema(db)
    before = Databases.ledger(db)
    assert_equal ALL, before.keys

    log = Databases.relay_migrate(db)
    refute_match(/msg="migration applied"/, log)
    assert_equal before, Databases.ledger(db)
  end

  def test_stagedrain_migrate_then_rails_db_migrate_changes_nothing
    db = Databases.create
    Databases.relay_migrate(db)
    before = Databases.ledger(db)

    out = RailsApp.rails!("db:migrate", db: db)
    assert_match(/stagedrain: nothing to apply, the database has 008_leader/, out)
    assert_equal before, Databases.ledger(db)
    assert_equal Databases.reference_schema, Databases.schema(db)
  end

  def test_rollback_is_refused_and_keeps_the_tables
    db = Databases.create
    RailsApp.rails!("db:migrate", db: db)
    out, status = RailsApp.rails("db:rollback", db: db)
    refute status.success?
    assert_match(/stagedrain's tables hold jobs not yet relayed/, out)
    assert_equal ALL, Databases.ledger(db).keys
  end

  # schema.rb holds one line instead of the tables; db:schema:load makes them
  # from the SQL, ledger and all, and the relay takes the loaded table.
  def test_schema_rb_loads_the_same_tables_and_the_relay_takes_them
    RailsApp.migrated_db
    schema = File.read(File.join(RailsApp.root, "db/schema.rb"))
    Databases::TABLES.each { |t| refute_match(/create_table "#{t}"/, schema) }
    assert_match(/^  Stagedrain::Schema.migrate\(connection, through: "008_leader"\)\nend\n\z/, schema)

    db = Databases.create
    RailsApp.rails!("db:schema:load", db: db)
    assert_equal Databases.reference_schema, Databases.schema(db)
    assert_equal ALL, Databases.ledger(db).keys
    relay_takes_a_row(db)
  end

  # structure.sql is pg_dump's (faithful); stagedrain_migrations' rows follow.
  def test_structure_sql_loads_the_same_tables_and_the_ledger
    db = RailsApp.migrated_db
    sql = {"SCHEMA_FORMAT" => "sql"}
    RailsApp.rails!("db:schema:dump", db: db, env: sql)
    dump = File.read(File.join(RailsApp.root, "db/structure.sql"))
    assert_includes dump, "CREATE TABLE public.staged_jobs ("
    assert_includes dump, "CONSTRAINT staged_jobs_jid_format CHECK"
    assert_match(/ALTER COLUMN id SET DEFAULT\s+CASE\s+WHEN \(pg_current_xact_id\(\) IS NOT NULL\)/, dump)
    assert_includes dump, "INSERT INTO stagedrain_migrations (name) VALUES\n('001_staged_jobs'),"

    loaded = Databases.create
    RailsApp.rails!("db:schema:load", db: loaded, env: sql)
    assert_equal Databases.reference_schema, Databases.schema(loaded)
    assert_equal ALL, Databases.ledger(loaded).keys
  end

  # `rails test` prepares the test database from db/schema.rb (the Stagedrain
  # line included) and a test stages a job there.
  def test_rails_test_has_the_table_in_the_test_database
    RailsApp.migrated_db
    test_db = Databases.create
    out = RailsApp.rails!("test", db: test_db, env: {"PARALLEL_WORKERS" => "1"})
    assert_match(/1 runs, 1 assertions, 0 failures, 0 errors/, out)
  end

  def relay_takes_a_row(db)
    queue = "schema_#{SecureRandom.hex(4)}"
    PG.connect(Databases.url(db)) { |c| c.exec_params("INSERT INTO staged_jobs (queue, job_class) VALUES ($1, 'LoadedJob')", [queue]) }
    out, status = Open3.capture2e(ENV.fetch("STAGEDRAIN_BIN"), "--once", "--pg-url", Databases.url(db),
                                  "--redis-url", ENV.fetch("TEST_REDIS_URL"), "--log-level", "warn")
    assert status.success?, out
    job = JSON.parse(Redis.new(url: ENV.fetch("TEST_REDIS_URL")).lpop("queue:#{queue}").to_s)
    assert_equal "LoadedJob", job["class"]
  end
end
