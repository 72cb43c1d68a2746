# frozen_string_literal: true

require "open3"
require "securerandom"
require "pg"

# Fresh, empty databases on the harness's Postgres (as its superuser), for
# the tests of the schema: each a database of its own, dropped after.
module Databases
  ADMIN_URL = ENV.fetch("TEST_PG_URL")
  TABLES = %w[staged_jobs staged_jobs_dead staged_jobs_held staged_jobs_leader stagedrain_migrations].freeze

  module_function

  def admin
    @admin ||= PG.connect(ADMIN_URL)
  end

  # The harness's URL with another database name.
  def url(name)
    ADMIN_URL.sub(%r{/[^/?]*(\?|\z)}) { "/#{name}#{Regexp.last_match(1)}" }
  end

  def create
    name = "rb_schema_#{SecureRandom.hex(4)}"
    admin.exec("CREATE DATABASE #{name}")
    (@made ||= []) << name
    name
  end

  def drop_all
    (@made || []).each { |name| admin.exec("DROP DATABASE IF EXISTS #{name} WITH (FORCE)") }
    @made = []
  end

  # The relay's `stagedrain migrate`; returns its log (info level).
  def relay_migrate(name)
    out, status = Open3.capture2e(ENV.fetch("STAGEDRAIN_BIN"), "migrate", "--pg-url", url(name), "--log-level", "info")
    raise "stagedrain migrate failed: #{out}" unless status.success?

    out
  end

  # pg_dump's schema of the stagedrain tables (without its per-run \restrict
  # keys), for comparing two databases.
  def schema(name)
    out, status = Open3.capture2("pg_dump", "--schema-only", *TABLES.flat_map { |t| ["-t", t] }, url(name))
    raise "pg_dump failed" unless status.success?

    out.lines.grep_v(/\A\\(un)?restrict /).join
  end

  # stagedrain_migrations' rows, name => applied_at.
  def ledger(name)
    PG.connect(url(name)) do |c|
      c.exec("SELECT name, applied_at::text FROM stagedrain_migrations ORDER BY name").to_h { |r| r.values_at("name", "applied_at") }
    end
  end

  # A database `stagedrain migrate` made: what every other way must equal.
  def reference_schema
    @reference_schema ||= begin
      ref = create
      relay_migrate(ref)
      schema(ref)
    end
  end
end

Minitest.after_run { Databases.drop_all }
