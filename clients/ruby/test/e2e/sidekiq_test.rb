# frozen_string_literal: true

require_relative "../support/e2e"

# Sidekiq jobs through Stagedrain::Sidekiq.enable!, the relay and a stock
# Sidekiq 6.4 server.
class SidekiqE2ETest < E2ETest
  class Trace
    def call(_klass, item, _queue, _pool)
      item["trace_id"] = "trace-1"
      yield
    end
  end

  def test_jobs_run_once_with_their_arguments_and_options
    jids = []
    Sidekiq.client_middleware.add(Trace)
    ActiveRecord::Base.transaction do
      jids << PlainJob.perform_async(1, "two", {"k" => [nil, true, 1.5]}, 12_345_678_901_234_567_890)
      jids << PlainJob.set(queue: "mailers", retry: 2, tags: ["t"]).perform_async("m")
      jids.concat(Sidekiq::Client.push_bulk("class" => PlainJob, "args" => [["b1"], ["b2"]]))
    end
    recs = wait_ran(jids)

    assert_equal [[1, "two", {"k" => [nil, true, 1.5]}, 12_345_678_901_234_567_890], ["m"], ["b1"], ["b2"]],
                 jids.map { |j| recs[j]["args"] }
    assert_equal jids, jids.map { |j| recs[j]["item"]["jid"] }, "the returned jid is the one the worker ran"
    mail = recs[jids[1]]["item"]
    assert_equal ["mailers", 2, ["t"], "trace-1", "PlainJob"], mail.values_at("queue", "retry", "tags", "trace_id", "class")
    assert_equal [true, "default"], recs[jids[0]]["item"].values_at("retry", "queue")
  ensure
    Sidekiq.client_middleware.remove(Trace)
  end

  # A Float arrives a Float, and a jid the caller chose is the one the worker
  # runs under.
  def test_floats_and_a_custom_jid_arrive_as_pushed
    own = SecureRandom.hex(12)
    jids = ActiveRecord::Base.transaction do
      [PlainJob.perform_async(1.0e20, -1.0e16, 2.5e-05, 10**20),
       Sidekiq::Client.push("class" => PlainJob, "args" => [1.0e20], "jid" => own)]
    end
    recs = wait_ran(jids)

    assert_equal own, jids[1]
    assert_equal [1.0e20, -1.0e16, 2.5e-05, 10**20], recs[jids[0]]["args"]
    assert_equal [Float, Float, Float, Integer], recs[jids[0]]["args"].map(&:class)
    assert_equal [own, [1.0e20]], [recs[own]["item"]["jid"], recs[own]["args"]]
    assert_instance_of Float, recs[own]["args"][0]
  end

  # The worker receives the text Sidekiq wrote: a Hash's keys in their order,
  # -0.0 and 1.0e+16 as Floats, a NUL inside a string as the character (in a
  # value: the relay's JSON reader, jansson, refuses one in an object key).
  def test_key_order_number_spelling_and_nul_arrive_as_written
    args = [{"zeta" => 1, "alpha" => 2, "mid" => {"b" => [1.0e16], "a" => -0.0}}, "a\u0000b", {"k" => "\u0000"}]
    jid = ActiveRecord::Base.transaction { PlainJob.set(tags: ["t\u0000"]).perform_async(*args) }
    rec = wait_ran([jid])[jid]

    assert_equal args, rec["args"]
    assert_equal %w[zeta alpha mid], rec["args"][0].keys
    assert_equal %w[b a], rec["args"][0]["mid"].keys
    assert_equal ["1.0e+16", "-0.0"], [rec["args"][0]["mid"]["b"][0].to_s, rec["args"][0]["mid"]["a"].to_s]
    assert_equal ["a\u0000b", "\u0000"], [rec["args"][1], rec["args"][2]["k"]]
    assert_equal ["t\u0000"], rec["item"]["tags"]
  end

  def test_a_thousand_jobs_of_one_transaction_run_in_staging_order
    tag = "sk-#{SecureRandom.hex(4)}"
    jids = ActiveRecord::Base.transaction do
      Array.new(500) { |i| OrderedPlainJob.perform_async(tag, i) } +
        OrderedPlainJob.perform_bulk((500...1000).map { |i| [tag, i] })
    end
    wait_until("1,000 ordered jobs", timeout: 90) { redis.llen("rb:order:#{tag}") >= 1000 }

    assert_equal (0...1000).map(&:to_s), redis.lrange("rb:order:#{tag}", 0, -1)
    wait_ran(jids)
  end

  def test_perform_in_runs_not_before_its_time
    at = Time.now.to_f + 3
    jid = ActiveRecord::Base.transaction { PlainJob.perform_at(at, "later") }
    rec = wait_ran([jid])[jid]

    assert_operator rec["ran_at"], :>=, at, "ran #{(at - rec["ran_at"]).round(3)} s early"
  end
end
