# frozen_string_literal: true

require "tmpdir"
require_relative "../support/rails_app"

# rails g stagedrain:install in the shared app: the migration it writes, and
# what it writes when run again.
class GeneratorTest < Minitest::Test
  def migrations(root = RailsApp.root)
    Dir.glob(File.join(root, "db/migrate/*.rb")).sort
  end

  def test_it_writes_one_migration_through_the_newest_file
    assert_match(%r{create\s+db/migrate/\d{14}_create_stagedrain_tables\.rb}, RailsApp.generated)
    files = migrations.grep(/stagedrain/)
    assert_equal 1, files.size
    text = File.read(files[0])
    assert_match(/^class CreateStagedrainTables < ActiveRecord::Migration\[6\.1\]$/, text)
    assert_includes text, %(Stagedrain::Schema.migrate(connection, through: "008_leader"))
    assert_includes text, "raise ActiveRecord::IrreversibleMigration"
  end

  def test_run_again_it_writes_nothing
    before = migrations
    out = RailsApp.rails!("g", "stagedrain:install")
    assert_match(/identical .*through 008_leader/, out)
    assert_equal before, migrations
  end

  # After a gem update: an app whose migration stops at an older file gets
  # one more migration, for the rest, and db:migrate applies just those to a
  # database the older migration made.
  def test_an_app_migrated_through_an_older_file_gets_a_second_migration
    root = RailsApp.root # makes RailsApp::DIR too, when this test runs first
    Dir.mktmpdir("shop", RailsApp::DIR) do |copy|
      FileUtils.cp_r("#{root}/.", copy)
      old = migrations(copy).grep(/stagedrain/)[0]
      File.write(old, File.read(old).sub("008_leader", "007_json_payload"))
      db = Databases.create
      migrate = -> { RailsApp.sh!("bin/rails", "db:migrate", env: {"DATABASE_URL" => Databases.url(db)}, chdir: copy) }
      migrate.call
      assert_equal "007_json_payload", Databases.ledger(db).keys.last
      refute_includes Databases.schema(db), "staged_jobs_leader"

      out = RailsApp.sh!("bin/rails", "g", "stagedrain:install", chdir: copy)
      added = migrations(copy).grep(/update_stagedrain_tables_to_008_leader/)
      assert_equal 1, added.size, out
      assert_match(/^class UpdateStagedrainTablesTo008Leader < /, File.read(added[0]))
      assert_includes File.read(added[0]), %(through: "008_leader")

      out = migrate.call
      assert_match(/stagedrain: applied 008_leader$/, out)
      assert_equal Databases.reference_schema, Databases.schema(db)
    end
  end
end
