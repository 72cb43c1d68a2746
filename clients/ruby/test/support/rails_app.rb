# frozen_string_literal: true

require "minitest/autorun"
require "fileutils"
require "json"
require "open3"
require "redis"
require_relative "databases"

# One Rails 6.1 app for every test of test/rails, made once the way the
# README makes one (rails new offline, Debian's gems, the gem by path) and
# run through its own commands (bin/rails, sidekiq) as child processes.
module RailsApp
  CLIENT = File.expand_path("../..", __dir__)
  DIR = File.join(ENV.fetch("TEST_DIR"), "ruby-rails")
  ROOT = File.join(DIR, "shop")
  FILES = File.expand_path("../rails/app", __dir__)
  NEW = %w[rails new shop --skip-bundle --skip-git --database=postgresql --skip-javascript --skip-sprockets
           --skip-puma --skip-listen --skip-bootsnap --skip-spring --skip-action-mailer --skip-action-mailbox
           --skip-action-text --skip-active-storage --skip-action-cable --skip-jbuilder --skip-turbolinks
           --skip-system-test --skip-webpack-install].freeze

  module_function

  # The app's root, made on first use: rails new, the Gemfile resolved from
  # the installed gems, the adapter set, the job classes and the test of
  # test/rails/app copied in, and `rails g stagedrain:install` run.
  def root
    @root ||= begin
      FileUtils.rm_rf(DIR)
      FileUtils.mkdir_p(DIR)
      sh!(*NEW, chdir: DIR)
      gemfile = File.join(ROOT, "Gemfile")
      # Not installed, and of no use here: Debian has no byebug, web-console.
      lines = File.readlines(gemfile).grep_v(/byebug|web-console/)
      File.write(gemfile, lines.join + %(gem "sidekiq"\ngem "stagedrain", path: #{CLIENT.inspect}\n))
      sh!("bundle", "install", "--local", "--quiet")
      FileUtils.cp_r("#{FILES}/.", ROOT)
      edit("config/application.rb", /^    config.load_defaults 6.1\n/, <<-RUBY)
    config.load_defaults 6.1
    config.active_job.queue_adapter = :stagedrain
    # The tests dump and load both formats.
    config.active_record.schema_format = ENV.fetch("SCHEMA_FORMAT", "ruby").to_sym
      RUBY
      # The status task's test names the database here, not in DATABASE_URL.
      edit("config/database.yml", /^  database: shop_development$/, %(  database: <%= ENV.fetch("SHOP_DB", "shop_development") %>))
      @generated = sh!("bin/rails", "g", "stagedrain:install")
      ROOT
    end
  end

  # What the first `rails g stagedrain:install` printed.
  def generated
    root
    @generated
  end

  # A fresh database that `rails db:migrate` made (writing db/schema.rb).
  def migrated_db
    @migrated_db ||= Databases.create.tap { |db| rails!("db:migrate", db: db) }
  end

  def edit(path, pattern, replacement)
    file = File.join(ROOT, path)
    text = File.read(file)
    raise "#{path}: #{pattern.inspect} not found" unless text.match?(pattern)

    File.write(file, text.sub(pattern, replacement))
  end

  # bin/rails ARGS in the app, with DATABASE_URL naming db (if given);
  # returns [output, status].
  def rails(*args, db: nil, env: {})
    root
    env = env.merge("DATABASE_URL" => Databases.url(db)) if db
    sh("bin/rails", *args, env: env)
  end

  def rails!(*args, **kw)
    succeeded!(["bin/rails", *args], *rails(*args, **kw))
  end

  # The harness's REDIS_URL, and no DATABASE_URL unless env gives one.
  def sh(*argv, env: {}, chdir: ROOT)
    env = {"DATABASE_URL" => nil, "REDIS_URL" => ENV.fetch("TEST_REDIS_URL")}.merge(env)
    Open3.capture2e(env, *argv, chdir: chdir, in: File::NULL)
  end

  def sh!(*argv, **kw)
    succeeded!(argv, *sh(*argv, **kw))
  end

  # out, or an error naming argv and status.
  def succeeded!(argv, out, status)
    raise "#{argv.join(" ")} failed (#{status}):\n#{out}" unless status.success?

    out
  end
end
