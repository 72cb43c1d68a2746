# frozen_string_literal: true

require_relative "../support/e2e"

# What commits runs; what rolls back (a transaction or a savepoint) never
# does; what was staged while no relay ran runs once one starts.
class TransactionsE2ETest < E2ETest
  def test_rolled_back_transactions_and_savepoints_never_run
    gone = []
    kept = []
    ActiveRecord::Base.transaction do
      gone << TypedJob.perform_later("rolled back").job_id
      gone << PlainJob.perform_async("rolled back")
      raise ActiveRecord::Rollback
    end
    ActiveRecord::Base.transaction do
      kept << TypedJob.perform_later("outer").job_id
      ActiveRecord::Base.transaction(requires_new: true) do
        gone << TypedJob.perform_later("savepoint").job_id
        gone.concat(PlainJob.perform_bulk([["savepoint"], ["savepoint"]]))
        raise ActiveRecord::Rollback
      end
      kept << PlainJob.perform_async("outer")
    end
    # Staged after the rolled-back ones on the same queue, run by one thread:
    # once these ran, anything before them would have too.
    recs = wait_ran(kept)

    never_ran(gone)
    assert_equal [["outer"], ["outer"]], kept.map { |id| recs[id]["kind"] == "sidekiq" ? recs[id]["args"] : recs[id]["args"].map(&:values).flatten }
  end

  def test_jobs_staged_while_the_relay_is_stopped_run_once_it_starts
    E2E.stop_relay
    aj = ActiveRecord::Base.transaction { Array.new(3) { |i| TypedJob.perform_later("offline", i) } }
    sleep 1
    never_ran(aj.map(&:job_id))
    staged = admin.exec_params("SELECT count(*) FROM staged_jobs WHERE jid = ANY($1::text[])",
                               [PG::TextEncoder::Array.new.encode(aj.map(&:provider_job_id))]).getvalue(0, 0)
    assert_equal "3", staged, "they wait in staged_jobs"

    # A relay run with --format activejob takes Sidekiq's rows too: they say
    # "activejob": false, and run as the plain Sidekiq jobs they are.
    sk = ActiveRecord::Base.transaction { Array.new(3) { |i| PlainJob.perform_async("offline", i) } }
    E2E.relay_once("activejob")
    wait_ran(aj.map(&:job_id))
    wait_ran(sk)

    later = ActiveRecord::Base.transaction { Array.new(3) { |i| PlainJob.perform_async("offline-2", i) } }
    sleep 1
    never_ran(later)
    E2E.start_relay
    wait_ran(later)
  end
end
