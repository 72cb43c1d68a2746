# frozen_string_literal: true

require "uri"
require_relative "../support/rails_app"

# rails stagedrain:status against the real servers. The app names its
# database in config/database.yml (no DATABASE_URL): the task hands it to
# `stagedrain status` as libpq's PG* variables.
class StatusTest < Minitest::Test
  def setup
    @db = Databases.create
    Databases.relay_migrate(@db)
    PG.connect(Databases.url(@db)) { |c| c.exec("INSERT INTO staged_jobs (queue, job_class) VALUES ('status', 'A'), ('status', 'B')") }
  end

  def teardown
    return unless @relay

    Process.kill("TERM", @relay)
    Process.wait(@relay)
  end

  def status(*args, env: {})
    pg = URI(ENV.fetch("TEST_PG_URL"))
    base = {"SHOP_DB" => @db, "PGHOST" => pg.host, "PGPORT" => pg.port.to_s, "PGUSER" => pg.user,
            "PGDATABASE" => nil, "STAGEDRAIN_BIN" => ENV.fetch("STAGEDRAIN_BIN")}
    task = args.empty? ? "stagedrain:status" : "stagedrain:status[#{args.join(" ")}]"
    RailsApp.rails(task, env: base.merge(env))
  end

  def test_no_relay_needs_attention_and_exits_1
    out, st = status
    assert_equal 1, st.exitstatus, out
    assert_match(/^stagedrain: needs attention:\n  - no relay holds the leader lock\n/, out)
    assert_match(/^  staged: 2\n  dead:   0$/, out, "the app's database, as database.yml names it")
  end

  def test_with_a_relay_running_it_is_healthy_and_exits_0
    @relay = Process.spawn(ENV.fetch("STAGEDRAIN_BIN"), "--pg-url", Databases.url(@db), "--redis-url",
                           ENV.fetch("TEST_REDIS_URL"), "--log-level", "warn", in: File::NULL)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
    loop do
      out, st = status("--max-age", "1h")
      if st.exitstatus.zero?
        assert_equal "stagedrain: healthy\n  staged: 0\n  dead:   0\n", out.lines.grep(/^(stagedrain|  )/).join
        break
      end
      flunk "not healthy within 30 s:\n#{out}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.2
    end
  end

  def test_a_bad_argument_exits_2_with_statuss_message
    out, st = status("--no-such-flag")
    assert_equal 2, st.exitstatus, out
    assert_match(/unknown option --no-such-flag/, out)
  end

  def test_no_binary_exits_2_and_says_what_to_do
    out, st = status(env: {"STAGEDRAIN_BIN" => nil, "PATH" => "/usr/bin:/bin"})
    assert_equal 2, st.exitstatus, out
    assert_match(/the relay's binary was not found: put `stagedrain` on PATH .* or set STAGEDRAIN_BIN/, out)
  end
end
