# frozen_string_literal: true

require_relative "../support/helper"

# Stagedrain::StagedJob, for staging rows by hand as the app role.
class StagedJobTest < RowTest
  def test_create_fills_jid_and_uuid_in_the_app
    job = nil
    sent = capture_sql { job = Stagedrain::StagedJob.create!(job_class: "HardJob", args: [1, "a"], options: {retry: 5}) }
    row, = rows

    assert_jid job.jid
    assert_match(/\A\h{8}-\h{4}-\h{4}-\h{4}-\h{12}\z/, job.uuid)
    assert_equal [job.id, job.jid, job.uuid], row.values_at("id", "jid", "uuid")
    assert_equal [[1, "a"], {"retry" => 5}], row.values_at("args", "options")
    # id comes from its sequence: the INSERT never names it.
    insert = sent.grep(/INSERT/).first
    refute_match(/"id"/, insert[/\(.*?\)/])
  end

  def test_values_given_are_kept
    job = Stagedrain::StagedJob.create!(job_class: "HardJob", jid: "a" * 24, uuid: "00000000-0000-4000-8000-000000000001")

    assert_equal ["a" * 24, "00000000-0000-4000-8000-000000000001"], rows[0].values_at("jid", "uuid")
    assert_equal "a" * 24, job.jid
  end

  # args and options hold ActiveRecord's JSON text: keys in their order, a
  # Float in Ruby's spelling, so it comes back a Float.
  def test_args_and_options_keep_their_text
    Stagedrain::StagedJob.create!(job_class: "HardJob", args: [{"zeta" => 1, "alpha" => 2}, 1.0e20, -0.0, 3],
                                  options: {"f" => 1.0e16, "b" => 1, "a" => 2})

    assert_equal ['[{"zeta":1,"alpha":2},1.0e+20,-0.0,3]', '{"f":1.0e+16,"b":1,"a":2}'],
                 rows[0].values_at("args_text", "options_text")
    assert_equal [[Hash, Float, Float, Integer], Float], [rows[0]["args"].map(&:class), rows[0]["options"]["f"].class]
  end

  private

  def capture_sql
    sql = []
    sub = ActiveSupport::Notifications.subscribe("sql.active_record") { |*, payload| sql << payload[:sql] }
    yield
    sql
  ensure
    ActiveSupport::Notifications.unsubscribe(sub)
  end
end
