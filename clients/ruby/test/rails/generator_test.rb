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
    assert_includes text, %(Stagedrain::Schema.migrate(connection, through: "007_json_payload"))
    assert_includes text, "raise ActiveRecord::IrreversibleMigration"
  end

  def test_run_again_it_writes_nothing
    before = migrations
    out = RailsApp.rails!("g", "stagedrain:install")
    assert_match(/identical .*through 007_json_payload/, out)
    assert_equal before, migrations
  end

  # After a gem update: an app whose migration stops at an older file gets
  # one more migration, for the rest.
  def test_an_app_migrated_through_an_older_file_gets_a_second_migration
    root = RailsApp.root # makes RailsApp::DIR too, when this test runs first
    Dir.mktmpdir("shop", RailsApp::DIR) do |copy|
      FileUtils.cp_r("#{root}/.", copy)
      old = migrations(copy).grep(/stagedrain/)[0]
      File.write(old, File.read(old).sub("007_json_payload", "006_routes"))
      out = RailsApp.sh!("bin/rails", "g", "stagedrain:install", chdir: copy)
      added = migrations(copy).grep(/update_stagedrain_tables_to_007_json_payload/)
      assert_equal 1, added.size, out
      assert_match(/^class UpdateStagedrainTablesTo007JsonPayload < /, File.read(added[0]))
      assert_includes File.read(added[0]), %(through: "007_json_payload")
    end
  end
end
