# frozen_string_literal: true

require_relative "../support/rails_app"

# Debian's Sidekiq 6.4 running the Rails app itself, whose adapter stays
# :stagedrain: committed jobs run once, rolled-back ones never, and a
# retry_on retry is staged (not pushed) from inside the worker.
class WorkerTest < Minitest::Test
  def setup
    @db = RailsApp.migrated_db
    @log = File.join(RailsApp::DIR, "runs-#{SecureRandom.hex(4)}.log")
    env = {"DATABASE_URL" => Databases.url(@db), "REDIS_URL" => ENV.fetch("TEST_REDIS_URL")}
    @sidekiq = Process.spawn(env, "bundle", "exec", "sidekiq", "-c", "1", "-t", "5", chdir: RailsApp.root,
                             in: File::NULL, %i[out err] => [File.join(RailsApp::DIR, "sidekiq.log"), "a"])
  end

  def teardown
    Process.kill("TERM", @sidekiq)
    Process.wait(@sidekiq)
  end

  def runner(code)
    RailsApp.rails!("runner", code, db: @db)
  end

  def relay_once
    out, status = Open3.capture2e(ENV.fetch("STAGEDRAIN_BIN"), "--once", "--pg-url", Databases.url(@db),
                                  "--redis-url", ENV.fetch("TEST_REDIS_URL"), "--log-level", "warn")
    assert status.success?, out
  end

  def staged(job_class)
    PG.connect(Databases.url(@db)) { |c| c.exec_params("SELECT uuid FROM staged_jobs WHERE job_class = $1", [job_class]).column_values(0) }
  end

  def runs
    File.exist?(@log) ? File.readlines(@log, chomp: true) : []
  end

  def wait_for(what, timeout: 30)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until (value = yield)
      flunk "timed out after #{timeout} s waiting for #{what}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.05
    end
    value
  end

  def test_committed_runs_once_rolled_back_never_and_a_retry_is_staged
    ids = runner(<<~RUBY).split
      kept = ActiveRecord::Base.transaction { ReceiptJob.perform_later(#{@log.inspect}, "kept") }
      ActiveRecord::Base.transaction { ReceiptJob.perform_later(#{@log.inspect}, "gone"); raise ActiveRecord::Rollback }
      flaky = FlakyJob.perform_later(#{@log.inspect})
      puts kept.job_id, flaky.job_id
    RUBY
    kept, flaky = ids.last(2)
    assert_equal [kept], staged("ReceiptJob"), "the rolled-back job was never staged"
    relay_once
    wait_for("both jobs' first runs") { runs.size >= 2 }

    # FlakyJob's first run failed; retry_on staged it again, from the worker.
    assert_equal [flaky], wait_for("the retry staged") { staged("FlakyJob").then { |u| u unless u.empty? } }
    relay_once
    wait_for("the retry's run") { runs.size >= 3 }
    sleep 1 # a duplicate run would show by now
    assert_equal ["kept #{kept}", "#{flaky} 1", "#{flaky} 2"].sort, runs.sort
  end
end
