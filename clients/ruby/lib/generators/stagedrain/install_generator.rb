# frozen_string_literal: true

require "rails/generators"
require "rails/generators/active_record/migration"
require "stagedrain/schema"

module Stagedrain
  module Generators
    # rails g stagedrain:install: a migration that makes the relay's tables
    # from the gem's SQL, through the newest stagedrain migration the gem
    # has. Run again after updating the gem, it writes one more migration
    # that applies the newer ones; with nothing new, it writes nothing.
    class InstallGenerator < Rails::Generators::Base
      include ActiveRecord::Generators::Migration

      source_root File.expand_path("templates", __dir__)
      class_option :database, type: :string, aliases: %i[--db],
                              desc: "The database (config/database.yml) whose migrations_paths get the migration"
      desc "Writes a migration that makes stagedrain's tables (staged_jobs and the relay's) from the gem's SQL files."

      def create_migration_file
        @through = Stagedrain::Schema.latest
        have = migrated_through
        if have && have >= @through
          say_status :identical, "a migration in #{db_migrate_path} applies stagedrain's schema through #{have}", :blue
          return
        end
        @migration_name = have ? "update_stagedrain_tables_to_#{@through}" : "create_stagedrain_tables"
        migration_template "migration.rb.tt", File.join(db_migrate_path, "#{@migration_name}.rb")
      end

      private

      # The newest stagedrain migration the app's migrations apply already.
      def migrated_through
        Dir.glob(File.join(File.expand_path(db_migrate_path, destination_root), "*.rb")).filter_map do |file|
          File.read(file)[/Stagedrain::Schema\.migrate\(.*through:\s*"(\d{3}_[a-z0-9_]+)"/, 1]
        end.max
      end

      def migration_class_name
        @migration_name.camelize
      end

      def migration_version
        "[#{ActiveRecord::Migration.current_version}]"
      end
    end
  end
end
