# frozen_string_literal: true

require_relative "../support/helper"

# The rows `queue_adapter = :stagedrain` writes (CONTRACT: ActiveJob).
class ActiveJobRowsTest < RowTest
  def test_the_adapter_is_found_by_name
    assert_instance_of ActiveJob::QueueAdapters::StagedrainAdapter, ActiveJob::Base.queue_adapter
  end

  def test_perform_later_stages_the_serialized_job
    before = Time.now.to_f
    job = TypedJob.perform_later(1, "two", {"three" => [3]})
    row, = rows

    assert_equal 1, rows.size
    assert_equal ["default", "TypedJob"], [row["queue"], row["job_class"]]
    assert_equal({"activejob" => true, "serialized" => true}, row["options"])
    assert_nil row["run_at"]
    assert_in_delta before, row["created_at"], 5
    assert_jid row["jid"]
    # The return value names the row: provider_job_id is the jid, job_id the uuid.
    assert_equal [job.provider_job_id, job.job_id], [row["jid"], row["uuid"]]
    # args holds exactly ActiveJob's own serialize, with that same jid in it.
    assert_equal 1, row["args"].size
    data = row["args"][0]
    assert_equal job.serialize.except("enqueued_at"), data.except("enqueued_at")
    assert_equal [job.job_id, job.provider_job_id], data.values_at("job_id", "provider_job_id")
    assert_equal [1, "two", {"three" => [3], "_aj_symbol_keys" => []}], data["arguments"]
  end

  def test_set_wait_queue_and_priority
    job = TypedJob.set(wait: 10.minutes, queue: "mailers", priority: 7).perform_later
    row, = rows

    assert_equal "mailers", row["queue"]
    assert_in_delta job.scheduled_at.to_f, row["run_at"], 1e-5
    assert_in_delta Time.now.to_f + 600, row["run_at"], 5
    assert_equal [7, "mailers"], row["args"][0].values_at("priority", "queue_name")
  end

  def test_set_wait_until_is_the_run_at
    at = Time.utc(2031, 5, 6, 7, 8, 9.123456r)
    TypedJob.set(wait_until: at).perform_later

    assert_in_delta at.to_f, rows[0]["run_at"], 1e-5
  end

  def test_rolled_back_transaction_stages_nothing
    ActiveRecord::Base.transaction do
      TypedJob.perform_later(1)
      raise ActiveRecord::Rollback
    end

    assert_empty rows
  end

  def test_rolled_back_savepoint_drops_only_its_jobs
    kept = []
    ActiveRecord::Base.transaction do
      kept << TypedJob.perform_later("before")
      ActiveRecord::Base.transaction(requires_new: true) do
        TypedJob.perform_later("inside")
        raise ActiveRecord::Rollback
      end
      kept << TypedJob.perform_later("after")
    end

    assert_equal kept.map(&:job_id), rows.map { |r| r["uuid"] }
    assert_equal [["before"], ["after"]], rows.map { |r| r["args"][0]["arguments"] }
  end

  def test_an_argument_activejob_cannot_serialize_raises_and_stages_nothing
    ActiveRecord::Base.transaction do
      assert_raises(ActiveJob::SerializationError) { TypedJob.perform_later(Object.new) }
      # Nothing reached Postgres, so the transaction is still usable.
      TypedJob.perform_later("next")
    end

    assert_equal [["next"]], rows.map { |r| r["args"][0]["arguments"] }
  end

  # args holds the text JSON.generate wrote: the Hash's keys in their order,
  # each Float spelled as Ruby spells it, so the worker's JSON.parse reads a
  # Float (1.0e+20, -0.0) where the app passed one.
  def test_args_are_the_text_activejob_wrote
    job = TypedJob.perform_later({"zeta" => 1, "alpha" => 2}, 1.0e20, -1.0e16, -0.0, 2.5e-05, 7, {"f" => 1.0e300})
    row, = rows

    # (serialize again gives another enqueued_at; merge keeps its place.)
    assert_equal JSON.generate([job.serialize.merge("enqueued_at" => row["args"][0]["enqueued_at"])]), row["args_text"]
    assert_includes row["args_text"], '"arguments":[{"zeta":1,"alpha":2,"_aj_symbol_keys":[]},1.0e+20,-1.0e+16,-0.0,2.5e-05,7,'
    args = row["args"][0]["arguments"]
    assert_equal %w[zeta alpha _aj_symbol_keys], args[0].keys
    assert_equal [1.0e20, -1.0e16, -0.0, 2.5e-05, 7], args[1, 5]
    assert_equal [Float, Float, Float, Float, Integer], args[1, 5].map(&:class)
    assert_equal "-0.0", args[3].to_s
    assert_instance_of Float, args[6]["f"]
  end

  # json keeps a NUL inside a string as the six characters \u0000, and every
  # worker's JSON reader gives the character back. A text column (the queue)
  # cannot hold one: that still raises before the INSERT.
  def test_a_nul_character_in_an_argument_is_staged
    TypedJob.perform_later("a\u0000b", {"k" => "\u0000"})

    assert_includes rows[0]["args_text"], '["a\\u0000b",{"k":"\\u0000"'
    assert_equal ["a\u0000b", {"k" => "\u0000", "_aj_symbol_keys" => []}], rows[0]["args"][0]["arguments"]
    # The six characters \u0000 are ordinary text.
    admin.exec("DELETE FROM staged_jobs")
    TypedJob.perform_later("\\u0000", "\\\\u0000")
    assert_equal ["\\u0000", "\\\\u0000"], rows[0]["args"][0]["arguments"]
  end

  def test_a_nul_character_in_the_queue_raises_before_the_insert
    sent = inserts do
      err = assert_raises(ArgumentError) { TypedJob.set(queue: "q\u0000").perform_later(1) }
      assert_match(/the queue "q\\u0000" contains the NUL character/, err.message)
    end

    assert_empty sent
    assert_empty rows
  end

  def test_a_missing_table_says_to_migrate
    err = assert_raises(Stagedrain::NotMigrated) do
      ActiveRecord::Base.transaction do
        ActiveRecord::Base.connection.execute("SET LOCAL search_path = ''")
        TypedJob.perform_later(1)
      end
    end

    assert_kind_of ActiveRecord::StatementInvalid, err
    assert_match(/stagedrain migrate/, err.message)
    assert_match(/staged_jobs/, err.message)
  end

  def test_a_failed_insert_leaves_no_provider_job_id
    job = TypedJob.new(1)
    assert_raises(ArgumentError) { TypedJob.new(1).enqueue(queue: "q\u0000") }
    assert_raises(Stagedrain::NotMigrated) do
      ActiveRecord::Base.transaction do
        ActiveRecord::Base.connection.execute("SET LOCAL search_path = ''")
        job.enqueue
      end
    end

    assert_nil job.provider_job_id
  end

  def test_a_job_id_that_is_not_a_uuid_stays_in_the_payload
    job = TypedJob.new(1)
    job.job_id = "order-42"
    job.enqueue
    row, = rows

    assert_equal "order-42", row["args"][0]["job_id"]
    assert_match(/\A\h{8}-\h{4}-\h{4}-\h{4}-\h{12}\z/, row["uuid"])
  end

  def test_enqueue_all_is_one_insert
    jobs = [TypedJob.new(1), TypedJob.new(2), TypedJob.new(3)]
    jobs[1].scheduled_at = Time.now.to_f + 60
    count = nil
    sent = inserts { count = ActiveJob::Base.queue_adapter.enqueue_all(jobs) }

    assert_equal 1, sent.size
    assert_equal 3, count
    assert_equal jobs.map(&:provider_job_id), rows.map { |r| r["jid"] }
    assert_equal jobs.map(&:job_id), rows.map { |r| r["uuid"] }
    assert_equal [nil, true, nil], rows.map { |r| r["run_at"] && true }
  end

  def test_perform_all_later_where_rails_has_it
    skip "ActiveJob.perform_all_later is Rails 7.1+ (this is #{ActiveJob.version})" unless ActiveJob.respond_to?(:perform_all_later)

    jobs = [TypedJob.new(1), TypedJob.new(2)]
    sent = inserts { ActiveJob.perform_all_later(jobs) }

    assert_equal 1, sent.size
    assert jobs.all?(&:successfully_enqueued?)
    assert_equal jobs.map(&:provider_job_id), rows.map { |r| r["jid"] }
  end

  def test_staging_is_never_deferred_to_after_commit
    refute ActiveJob::Base.queue_adapter.enqueue_after_transaction_commit?
    # The row is written inside the open transaction (Rails 6.1 never defers):
    # its session already holds the INSERT's lock, and others see nothing yet.
    ActiveRecord::Base.transaction do
      TypedJob.perform_later(1)
      pid = ActiveRecord::Base.connection.select_value("SELECT pg_backend_pid()")
      locks = admin.exec_params("SELECT count(*) FROM pg_locks WHERE pid = $1 AND mode = 'RowExclusiveLock'" \
                                " AND relation = 'staged_jobs'::regclass", [pid]).getvalue(0, 0)
      assert_equal ["1", 0], [locks, rows.size]
    end
    assert_equal 1, rows.size
  end
end
