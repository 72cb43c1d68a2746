# frozen_string_literal: true

require "fileutils"
require_relative "helper"

# One Sidekiq server (-c 1, so a queue runs in order) and one relay
# (--format sidekiq, which takes ActiveJob rows by their "activejob": true),
# started once and shared by every end-to-end case, stopped by PID at exit.
module E2E
  DIR = File.join(ENV.fetch("TEST_DIR"), "ruby-client")
  WORKER = File.expand_path("../e2e/worker.rb", __dir__)
  QUEUES = %w[default mailers ordered].freeze
  REDIS_URL = ENV.fetch("TEST_REDIS_URL")

  class << self
    def redis
      @redis ||= Redis.new(url: REDIS_URL)
    end

    def start_sidekiq
      @sidekiq ||= spawn_logged("sidekiq", ["sidekiq", "-r", WORKER, *QUEUES.flat_map { |q| ["-q", q] },
                                            "-c", "1", "-t", "5", "-e", "test"])
    end

    def start_relay
      @relay ||= spawn_logged("relay", relay_argv("sidekiq"))
    end

    def stop_relay
      stop(@relay, "relay")
      @relay = nil
    end

    # Drains what is committed with a relay of the given format, then exits.
    def relay_once(format)
      pid = spawn_logged("relay-once-#{format}", relay_argv(format) + ["--once"])
      _, status = Process.wait2(pid)
      raise "relay --once --format #{format} failed: #{status}" unless status.success?
    end

    def stop_all
      stop_relay
      stop(@sidekiq, "sidekiq")
      @sidekiq = nil
    end

    private

    def relay_argv(format)
      [ENV.fetch("STAGEDRAIN_BIN"), "--pg-url", ENV.fetch("STAGEDRAIN_RELAY_PG_URL"), "--redis-url", REDIS_URL,
       "--format", format, "--log-level", "warn"]
    end

    def spawn_logged(name, argv)
      FileUtils.mkdir_p(DIR)
      log = File.join(DIR, "#{name}.log")
      Process.spawn({"REDIS_URL" => REDIS_URL}, *argv, chdir: DIR, in: File::NULL, %i[out err] => [log, "a"])
    end

    # SIGTERM, then the process must be gone within 15 s (SIGKILL after that).
    def stop(pid, name)
      return unless pid

      Process.kill("TERM", pid)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 15
      until Process.wait(pid, Process::WNOHANG)
        if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
          warn "e2e: #{name} (pid #{pid}) ignored SIGTERM for 15 s; killing it"
          Process.kill("KILL", pid)
          Process.wait(pid)
          break
        end
        sleep 0.05
      end
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end

  Minitest.after_run { stop_all }
end

class E2ETest < Minitest::Test
  include RowHelpers

  def setup
    E2E.start_sidekiq
    E2E.start_relay
  end

  # Nothing a test staged may have been dead-lettered by the relay.
  def teardown
    dead = admin.exec("SELECT job_class, reason FROM staged_jobs_dead").to_a
    assert_empty dead, "the relay dead-lettered rows"
  end

  def redis
    E2E.redis
  end

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  def wait_until(what, timeout: 30)
    deadline = now + timeout
    loop do
      value = yield
      return value if value
      flunk "timed out after #{timeout} s waiting for #{what}" if now > deadline
      sleep 0.05
    end
  end

  # Waits until every id ran, then a second more so a duplicate would show;
  # each must have run exactly once. Returns the records by id.
  def wait_ran(ids, timeout: 30)
    wait_until("#{ids.size} jobs to run", timeout: timeout) { redis.hmget(Recorder::RUNS, *ids).none?(&:nil?) }
    sleep 1
    assert_equal [1] * ids.size, redis.hmget(Recorder::RUNS, *ids).map(&:to_i), "every job runs exactly once"
    records(ids)
  end

  def records(ids)
    wanted = ids.to_h { |id| [id, true] }
    redis.lrange(Recorder::RAN, 0, -1).map { |j| JSON.parse(j) }.select { |r| wanted[r["id"]] }.to_h { |r| [r["id"], r] }
  end

  def never_ran(ids)
    assert_equal [nil] * ids.size, redis.hmget(Recorder::RUNS, *ids), "rolled-back jobs never run"
  end
end
