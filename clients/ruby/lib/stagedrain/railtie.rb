# frozen_string_literal: true

require "rails/railtie"

module Stagedrain
  # Hooks the gem into a Rails app: schema.rb and structure.sql keep the
  # relay's tables faithfully (Schema::RubyDump, Schema::SqlDump), and
  # `rails stagedrain:status` asks the relay how it is doing. The generator
  # (`rails g stagedrain:install`) Rails finds by its path.
  class Railtie < Rails::Railtie
    initializer "stagedrain.schema_dump" do
      ActiveSupport.on_load(:active_record) do
        require "stagedrain/schema_dump"
        ActiveRecord::SchemaDumper.prepend(Stagedrain::Schema::RubyDump)
        ActiveRecord::ConnectionAdapters::AbstractAdapter.prepend(Stagedrain::Schema::SqlDump)
      end
    end

    rake_tasks do
      load File.expand_path("../tasks/stagedrain.rake", __dir__)
    end
  end
end
