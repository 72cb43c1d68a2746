# frozen_string_literal: true

require "minitest/autorun"
require "stringio"
require "tmpdir"
require "stagedrain/status"

# Stagedrain::Status without a relay: which database it hands `stagedrain
# status`, and the summary of a report (a stand-in binary prints one).
class StatusUnitTest < Minitest::Test
  CONFIG = {adapter: "postgresql", host: "db.internal", port: 5433, username: "shop", password: "pw",
            database: "shop_production"}.freeze

  def test_the_apps_database_config_becomes_pg_variables
    assert_equal({"PGHOST" => "db.internal", "PGPORT" => "5433", "PGUSER" => "shop", "PGPASSWORD" => "pw",
                  "PGDATABASE" => "shop_production"}, Stagedrain::Status.child_env({}, CONFIG))
  end

  def test_the_relays_own_settings_win_over_the_apps_config
    %w[STAGEDRAIN_PG_URL STAGEDRAIN_PG_URL_FILE DATABASE_URL].each do |var|
      assert_equal({}, Stagedrain::Status.child_env({var => "postgresql://relay@db/shop"}, CONFIG), var)
    end
  end

  def test_a_report_with_problems_and_no_backlog
    report = {"healthy" => false, "problems" => ["postgres unreachable", "no relay holds the leader lock"],
              "backlog" => nil, "dead" => nil}
    Dir.mktmpdir do |dir|
      bin = File.join(dir, "stagedrain")
      File.write(bin, "#!/bin/sh\n[ \"$1 $2 $3\" = 'status --json --max-age' ] || exit 3\necho '#{JSON.generate(report)}'\nexit 1\n")
      File.chmod(0o755, bin)
      out = StringIO.new
      code = Stagedrain::Status.run(%w[--max-age 1h], env: {"STAGEDRAIN_BIN" => bin}, out: out)
      assert_equal 1, code
      assert_equal "stagedrain: needs attention:\n  - postgres unreachable\n  - no relay holds the leader lock\n" \
                   "  staged: unknown\n  dead:   unknown\n", out.string
    end
  end

  def test_a_stagedrain_bin_that_is_not_executable_is_named
    err = StringIO.new
    assert_equal 2, Stagedrain::Status.run([], env: {"STAGEDRAIN_BIN" => "/nonexistent/stagedrain"}, err: err)
    assert_equal "stagedrain: STAGEDRAIN_BIN=/nonexistent/stagedrain is not an executable file\n", err.string
  end
end
