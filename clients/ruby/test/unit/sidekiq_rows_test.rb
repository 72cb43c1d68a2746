# frozen_string_literal: true

require_relative "../support/helper"

class TaggedJob
  include Sidekiq::Job
  sidekiq_options queue: "critical", retry: 3, backtrace: 5, tags: ["signup"]

  def perform(*); end
end

# The rows Sidekiq's own client writes once Stagedrain::Sidekiq.enable! ran
# (CONTRACT: Sidekiq): Sidekiq builds the item, the client splits it.
class SidekiqRowsTest < RowTest
  def teardown
    Sidekiq.strict_args!(:warn)
    Stagedrain::Sidekiq.enable!
  end

  def test_perform_async_stages_the_item
    before = Time.now.to_f
    jid = PlainJob.perform_async(1, "two", {"three" => [3]}, nil, 1.5)
    row, = rows

    assert_equal 1, rows.size
    assert_jid jid
    assert_equal [jid, "default", "PlainJob"], row.values_at("jid", "queue", "job_class")
    assert_equal [1, "two", {"three" => [3]}, nil, 1.5], row["args"]
    assert_equal({"retry" => true, "activejob" => false}, row["options"])
    assert_nil row["run_at"]
    assert_in_delta before, row["created_at"], 5
  end

  def test_sidekiq_options_pass_through
    jid = TaggedJob.perform_async(1)
    row, = rows

    assert_equal [jid, "critical"], row.values_at("jid", "queue")
    assert_equal({"retry" => 3, "backtrace" => 5, "tags" => ["signup"], "activejob" => false}, row["options"])
  end

  def test_set_queue_and_retry
    jid = PlainJob.set(queue: "other", retry: false).perform_async(2)
    row, = rows

    assert_equal [jid, "other", {"retry" => false, "activejob" => false}], row.values_at("jid", "queue", "options")
  end

  def test_perform_in_and_perform_at_are_the_run_at
    PlainJob.perform_in(30, 1)
    at = Time.now.to_f + 3600
    PlainJob.perform_at(at, 2)
    PlainJob.set(wait: 90).perform_async(3)
    in30, at3600, wait90 = rows

    assert_in_delta Time.now.to_f + 30, in30["run_at"], 5
    assert_in_delta at, at3600["run_at"], 1e-5
    assert_in_delta Time.now.to_f + 90, wait90["run_at"], 5
    # "at" is a column of its own, not an option.
    assert_equal [{"retry" => true, "activejob" => false}] * 3, rows.map { |r| r["options"] }
  end

  def test_push_bulk_is_one_insert_in_order
    at = Time.now.to_f + 100
    jids = nil
    sent = inserts do
      jids = Sidekiq::Client.push_bulk("class" => PlainJob, "args" => [[1], [2], [3]], "at" => [at, at + 1, at + 2])
    end

    assert_equal 1, sent.size
    assert_equal jids, rows.map { |r| r["jid"] }
    assert_equal [[1], [2], [3]], rows.map { |r| r["args"] }
    rows.each_with_index { |r, i| assert_in_delta at + i, r["run_at"], 1e-5 }
  end

  def test_perform_bulk_returns_the_jids
    jids = PlainJob.perform_bulk([[1], [2]])

    assert_equal 2, jids.size
    assert_equal jids, rows.map { |r| r["jid"] }
  end

  def test_client_push_with_a_class_name
    jid = Sidekiq::Client.push("class" => "SomeOtherAppsJob", "queue" => "remote", "args" => [1], "custom" => "x")
    row, = rows

    assert_equal [jid, "SomeOtherAppsJob", "remote"], row.values_at("jid", "job_class", "queue")
    assert_equal({"retry" => true, "custom" => "x", "activejob" => false}, row["options"])
  end

  # A client middleware sees the item before it is staged; one that stops
  # the job stops the row too.
  class AddTrace
    def call(_klass, item, _queue, _pool)
      return false if item["args"] == ["drop"]

      item["trace_id"] = "t-1"
      yield
    end
  end

  def test_client_middleware_runs_before_staging
    Sidekiq.client_middleware.add(AddTrace)
    jid = PlainJob.perform_async("keep")
    dropped = PlainJob.perform_async("drop")

    assert_nil dropped
    assert_equal [jid], rows.map { |r| r["jid"] }
    assert_equal({"retry" => true, "trace_id" => "t-1", "activejob" => false}, rows[0]["options"])
  ensure
    Sidekiq.client_middleware.remove(AddTrace)
  end

  def test_rolled_back_transaction_and_savepoint
    kept = nil
    ActiveRecord::Base.transaction do
      PlainJob.perform_async("gone")
      raise ActiveRecord::Rollback
    end
    ActiveRecord::Base.transaction do
      kept = PlainJob.perform_async("kept")
      ActiveRecord::Base.transaction(requires_new: true) do
        PlainJob.perform_bulk([["savepoint"], ["savepoint"]])
        raise ActiveRecord::Rollback
      end
    end

    assert_equal [kept], rows.map { |r| r["jid"] }
  end

  def test_strict_args_raise_as_sidekiq_does_and_stage_nothing
    Sidekiq.strict_args!
    assert_raises(ArgumentError) { PlainJob.perform_async(:symbol) }
    assert_raises(ArgumentError) { PlainJob.perform_async({"at" => Time.now}) }
    assert_raises(ArgumentError) { Sidekiq::Client.push_bulk("class" => PlainJob, "args" => [[1], [Object.new]]) }

    assert_empty rows
  end

  # A NUL inside a string is staged: json keeps Sidekiq's \u0000 escape. The
  # queue is a text column, which cannot hold one: that raises before the
  # INSERT, and the caller's transaction goes on.
  def test_a_nul_character_in_arguments_and_options_is_staged
    jid = PlainJob.set(tags: ["t\u0000"]).perform_async("a\u0000b", {"k" => "\u0000"})
    row, = rows

    assert_equal [jid, '["a\\u0000b",{"k":"\\u0000"}]'], row.values_at("jid", "args_text")
    assert_equal ["a\u0000b", {"k" => "\u0000"}], row["args"]
    assert_equal ["t\u0000"], row["options"]["tags"]
  end

  def test_a_nul_character_in_the_queue_raises_before_the_insert
    sent = inserts do
      ActiveRecord::Base.transaction do
        assert_raises(ArgumentError) { PlainJob.set(queue: "q\u0000").perform_async(1) }
        PlainJob.perform_async(2)
      end
    end

    assert_equal 1, sent.size
    assert_equal [[2]], rows.map { |r| r["args"] }
  end

  # The row holds the text Sidekiq.dump_json wrote: the keys of a Hash in
  # their order, and each Float in Ruby's spelling (1.0e+20, -0.0), which
  # the worker's JSON.parse reads back as the same Float.
  FLOATS = [1.0e20, 1.0e16, -1.0e100, 2.5e-05, 1.0e-05, 1.5, 100.0, -0.0].freeze

  def test_args_and_options_are_the_text_sidekiq_wrote
    args = [{"zeta" => 1, "alpha" => 2, "mid" => {"b" => 1, "a" => 2}}, *FLOATS, 12, "1.0e+20", {"1.0e+20" => 1.0e20}]
    jid = Sidekiq::Client.push("class" => PlainJob, "args" => args, "big" => 1.0e20, "zz" => 1, "aa" => 2)
    row, = rows

    assert_equal jid, row["jid"]
    assert_equal Sidekiq.dump_json(args), row["args_text"]
    assert_equal '[{"zeta":1,"alpha":2,"mid":{"b":1,"a":2}},1.0e+20,1.0e+16,-1.0e+100,2.5e-05,1.0e-05,1.5,100.0,-0.0,' \
                 '12,"1.0e+20",{"1.0e+20":1.0e+20}]', row["args_text"]
    assert_equal '{"retry":true,"big":1.0e+20,"zz":1,"aa":2,"activejob":false}', row["options_text"]
    assert_equal args, row["args"]
    assert_equal [Float] * FLOATS.size + [Integer, String, Hash], row["args"].drop(1).map(&:class)
    assert_equal "-0.0", row["args"][FLOATS.size].to_s
  end

  # Sidekiq takes a jid the caller chose. One the staged_jobs table can hold
  # (24 lowercase hex digits, Sidekiq's own form) is the one the worker sees;
  # any other raises ArgumentError before the INSERT, so the caller's
  # transaction is not aborted and goes on.
  def test_a_custom_jid
    own = SecureRandom.hex(12)

    assert_equal own, Sidekiq::Client.push("class" => PlainJob, "args" => [1], "jid" => own)
    assert_equal [own], rows.map { |r| r["jid"] }

    admin.exec("DELETE FROM staged_jobs")
    user = nil
    sent = inserts do
      ActiveRecord::Base.transaction do
        err = assert_raises(ArgumentError) do
          Sidekiq::Client.push("class" => PlainJob, "args" => [1], "jid" => "my-custom-jid")
        end
        assert_match(/jid "my-custom-jid" is not 24 lowercase hex digits/, err.message)
        assert_raises(ArgumentError) { Sidekiq::Client.push("class" => PlainJob, "args" => [1], "jid" => own.upcase) }
        user = User.create!(email: "after@example.com")
        PlainJob.perform_async(2)
      end
    end

    assert_equal 1, sent.size
    assert User.exists?(user.id), "the transaction went on and committed"
    assert_equal [[2]], rows.map { |r| r["args"] }
  ensure
    User.where(email: "after@example.com").delete_all
  end

  def test_a_missing_table_says_to_migrate
    err = assert_raises(Stagedrain::NotMigrated) do
      ActiveRecord::Base.transaction do
        ActiveRecord::Base.connection.execute("SET LOCAL search_path = ''")
        PlainJob.perform_async(1)
      end
    end

    assert_match(/stagedrain migrate/, err.message)
  end

  def test_disable_pushes_to_redis_again
    redis = Redis.new(url: ENV.fetch("TEST_REDIS_URL"))
    redis.del("queue:unstaged")
    Stagedrain::Sidekiq.disable!
    jid = PlainJob.set(queue: "unstaged").perform_async(1)

    assert_empty rows
    assert_equal [jid], redis.lrange("queue:unstaged", 0, -1).map { |j| JSON.parse(j)["jid"] }
  ensure
    redis&.del("queue:unstaged")
    redis&.close
  end
end
