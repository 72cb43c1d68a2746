# frozen_string_literal: true

require_relative "lib/stagedrain/version"

# RubyGems before 3.4 packs spec.files relative to the working directory: let
# `gem build clients/ruby/stagedrain.gemspec` work from the repository root
# (the .gem is then written here, beside this file). Bundler already loads a
# path gem's gemspec from its own directory.
# (RubyGems evaluates this file under the path it was given, so __dir__ is
# relative: expand it before moving.)
here = File.realpath(__dir__)
Dir.chdir(here) unless File.realpath(Dir.pwd) == here

Gem::Specification.new do |spec|
  spec.name = "stagedrain"
  spec.version = Stagedrain::VERSION
  spec.summary = "Stage ActiveJob and Sidekiq jobs in Postgres, in the app's transaction, for the stagedrain relay"
  spec.description = <<~DESC
    An ActiveJob queue adapter (:stagedrain) and a Sidekiq client hook that write each job as a row of
    the staged_jobs table through ActiveRecord, inside the application's current transaction. The
    stagedrain relay pushes committed rows to Redis exactly as Rails' Sidekiq adapter or Sidekiq's own
    client would; rolled-back jobs never run.
  DESC
  spec.authors = ["stagedrain contributors"]
  spec.required_ruby_version = ">= 2.7"

  # sql/ is a link to the repository's sql/: the gem packs the real files,
  # the migrations only (not roles.sql, notify.sql, embed.sh).
  migrations = Dir.glob("sql/*.sql", base: here).grep(%r{\Asql/[0-9]{3}_[a-z0-9_]+\.sql\z})
  spec.files = Dir.glob(["lib/**/*.rb", "lib/**/*.rake", "lib/**/*.tt", "README.md"], base: here) + migrations
  spec.require_paths = ["lib"]

  spec.add_runtime_dependency "activerecord", ">= 6.1"
  # Sidekiq is optional (Stagedrain::Sidekiq); so are activejob and pg, which
  # an app that uses this gem already has.
end
