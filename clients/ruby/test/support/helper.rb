# frozen_string_literal: true

require "minitest/autorun"
require "pg"
require_relative "app"
require "stagedrain"
require "stagedrain/sidekiq"

ActiveJob::Base.queue_adapter = :stagedrain
Stagedrain::Sidekiq.enable!

# Reads what the app staged, as the superuser (the app role may not read
# staged_jobs), and counts the INSERT statements the client sent.
module RowHelpers
  def self.admin
    @admin ||= PG.connect(ENV.fetch("TEST_PG_URL"))
  end

  def admin
    RowHelpers.admin
  end

  def rows
    admin.exec(<<~SQL).map { |r| decode(r) }
      SELECT id, queue, job_class, args::text AS args, options::text AS options, jid, uuid::text AS uuid,
             extract(epoch FROM run_at)::float8 AS run_at, extract(epoch FROM created_at)::float8 AS created_at
        FROM staged_jobs ORDER BY id
    SQL
  end

  # args and options decoded, and as the json columns hold them (args_text,
  # options_text): the text the framework's encoder wrote.
  def decode(row)
    row.merge("id" => row["id"].to_i, "args" => JSON.parse(row["args"]), "options" => JSON.parse(row["options"]),
              "args_text" => row["args"], "options_text" => row["options"],
              "run_at" => row["run_at"]&.to_f, "created_at" => row["created_at"].to_f)
  end

  # The client's INSERTs run while the block does.
  def inserts
    sql = []
    sub = ActiveSupport::Notifications.subscribe("sql.active_record") do |*, payload|
      sql << payload[:sql] if payload[:name] == "Stagedrain Insert"
    end
    yield
    sql
  ensure
    ActiveSupport::Notifications.unsubscribe(sub)
  end

  def assert_jid(jid)
    assert_match(/\A\h{24}\z/, jid)
    assert_equal jid.downcase, jid
  end
end

# Each test starts from an empty staged_jobs.
class RowTest < Minitest::Test
  include RowHelpers

  def setup
    admin.exec("DELETE FROM staged_jobs")
  end
end
