# frozen_string_literal: true

require_relative "../support/e2e"

# ActiveJob through `queue_adapter = :stagedrain`, the relay and a stock
# Sidekiq 6.4 server running Rails' SidekiqAdapter::JobWrapper.
class ActiveJobE2ETest < E2ETest
  # What ActiveJob itself hands perform in a worker whose Time.zone is UTC:
  # its own serialize, JSON, deserialize round trip.
  def as_activejob_passes(values)
    Time.use_zone("UTC") do
      ActiveJob::Arguments.deserialize(JSON.parse(JSON.generate(ActiveJob::Arguments.serialize(values))))
    end
  end

  def test_every_argument_type_runs_once_as_activejob_passes_it
    user = job = args = kwargs = nil
    Time.use_zone("Europe/Berlin") do
      ActiveRecord::Base.transaction do
        user = User.create!(email: "ada@example.com")
        args = [user, :symbol, Time.utc(2024, 2, 29, 12, 0, 0.5r), Time.zone.local(2024, 10, 27, 2, 30, 15.25r),
                Date.new(2024, 2, 29), 3.days + 4.hours, BigDecimal("12345678901234567890.123456789"),
                {a: 1, b: [:c, {d: nil}]}, ActiveSupport::HashWithIndifferentAccess.new("x" => 1, "y" => {"z" => 2}),
                {"plain" => "strings"}, 42, -1.5, "text", nil, true, [1, [user]]]
        kwargs = {key: :kw, on: Date.new(2000, 1, 1), who: user}
        job = TypedJob.perform_later(*args, **kwargs)
      end
    end
    rec = wait_ran([job.job_id])[job.job_id]

    assert_equal job.provider_job_id, rec["jid"], "provider_job_id is the jid the worker ran"
    assert_equal Describe.call(as_activejob_passes(args)), rec["args"]
    assert_equal Describe.call(as_activejob_passes([kwargs])[0]), rec["kwargs"]
    # The same, spelled out: each value arrived as its own type.
    got = rec["args"]
    assert_equal({"record" => "User", "id" => user.id, "persisted" => true}, got[0], "located by its GlobalID")
    assert_equal({"Symbol" => "symbol"}, got[1])
    assert_equal({"Time" => "2024-02-29T12:00:00.500000000Z"}, got[2])
    assert_equal({"TimeWithZone" => "2024-10-27T00:30:15.250000000Z", "zone" => "UTC"}, got[3])
    assert_equal({"Date" => "2024-02-29"}, got[4])
    assert_equal({"Duration" => 273_600, "parts" => [["days", 3], ["hours", 4]]}, got[5])
    # Rails 6.1 passes a BigDecimal to JSON as it is, which writes its digits
    # as a string: Rails' own Sidekiq adapter delivers the same String (7.1
    # added a serializer that gives a BigDecimal back).
    assert_equal({"String" => "12345678901234567890.123456789"}, got[6])
    assert_equal [{"Symbol" => "a"}, {"Integer" => 1}], got[7]["Hash"][0]
    assert_equal [{"String" => "x"}, {"Integer" => 1}], got[8]["HashWithIndifferentAccess"][0]
    assert_equal [[{"Symbol" => "key"}, {"Symbol" => "kw"}], [{"Symbol" => "on"}, {"Date" => "2000-01-01"}]],
                 rec["kwargs"]["Hash"][0, 2]
    assert_equal "Europe/Berlin", rec["zone"], "perform runs in the job's time zone"
  end

  def test_queue_priority_enqueue_all_and_the_return_value
    jobs = []
    ActiveRecord::Base.transaction do
      jobs << TypedJob.set(queue: "mailers", priority: 3).perform_later("m")
      bulk = [TypedJob.new("b1"), TypedJob.new("b2")]
      ActiveJob::Base.queue_adapter.enqueue_all(bulk)
      jobs.concat(bulk)
    end
    recs = wait_ran(jobs.map(&:job_id))

    assert_equal [["mailers", 3], ["default", nil], ["default", nil]], jobs.map { |j| recs[j.job_id].values_at("queue", "priority") }
    assert_equal jobs.map(&:provider_job_id), jobs.map { |j| recs[j.job_id]["jid"] }
  end

  def test_floats_arrive_as_floats
    job = ActiveRecord::Base.transaction { TypedJob.perform_later(1.0e20, 3.0e16, 0.5, -0.0) }
    rec = wait_ran([job.job_id])[job.job_id]

    assert_equal [{"Float" => 1.0e20}, {"Float" => 3.0e16}, {"Float" => 0.5}, {"Float" => -0.0}], rec["args"]
    assert_equal "-0.0", rec["args"][3]["Float"].to_s
  end

  # perform receives a Hash with its keys in the order the app wrote them,
  # and a NUL inside a string as the character.
  def test_key_order_and_nul_arrive_as_written
    job = ActiveRecord::Base.transaction do
      TypedJob.perform_later({"zeta" => 1, "alpha" => {"b" => 1, "a" => 2}}, "a\u0000b", z: 1, a: "\u0000")
    end
    rec = wait_ran([job.job_id])[job.job_id]

    zeta_alpha = [[{"String" => "zeta"}, {"Integer" => 1}],
                  [{"String" => "alpha"}, {"Hash" => [[{"String" => "b"}, {"Integer" => 1}], [{"String" => "a"}, {"Integer" => 2}]]}]]
    assert_equal [{"Hash" => zeta_alpha}, {"String" => "a\u0000b"}], rec["args"]
    assert_equal({"Hash" => [[{"Symbol" => "z"}, {"Integer" => 1}], [{"Symbol" => "a"}, {"String" => "\u0000"}]]}, rec["kwargs"])
  end

  def test_a_thousand_jobs_of_one_transaction_run_in_staging_order
    tag = "aj-#{SecureRandom.hex(4)}"
    jobs = ActiveRecord::Base.transaction { Array.new(1000) { |i| OrderedJob.perform_later(tag, i) } }
    wait_until("1,000 ordered jobs", timeout: 90) { redis.llen("rb:order:#{tag}") >= 1000 }

    assert_equal (0...1000).map(&:to_s), redis.lrange("rb:order:#{tag}", 0, -1)
    wait_ran(jobs.map(&:job_id))
  end

  def test_set_wait_runs_not_before_its_time
    at = nil
    job = ActiveRecord::Base.transaction do
      TypedJob.set(wait: 3.seconds).perform_later("later").tap { |j| at = j.scheduled_at }
    end
    rec = wait_ran([job.job_id])[job.job_id]

    assert_operator rec["ran_at"], :>=, at, "ran #{(at - rec["ran_at"]).round(3)} s early"
  end
end
