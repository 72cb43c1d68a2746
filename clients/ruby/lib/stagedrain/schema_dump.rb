# frozen_string_literal: true

require "stagedrain/schema"

module Stagedrain
  module Schema
    # Prepended to ActiveRecord::SchemaDumper (db/schema.rb): instead of
    # create_table copies of the relay's tables, which Ruby cannot write
    # faithfully (the id default that takes the xid first, the identity
    # columns, the jid CHECK, stagedrain_migrations' rows), one line that
    # makes them from the same SQL on db:schema:load and db:test:prepare.
    # Only when the database records stagedrain's migrations; structure.sql
    # (pg_dump) is left alone: it copies the tables faithfully.
    module RubyDump
      private

      def ignored?(table_name)
        super || (!stagedrain_through.nil? && TABLES.include?(table_name))
      end

      def trailer(stream)
        through = stagedrain_through
        if through
          stream.puts "  # stagedrain's tables, from the gem's SQL files, as `stagedrain migrate` makes them"
          stream.puts "  Stagedrain::Schema.migrate(connection, through: #{through.inspect})"
        end
        super
      end

      def stagedrain_through
        @stagedrain_through = Schema.applied_through(@connection) unless defined?(@stagedrain_through)
        @stagedrain_through
      end
    end

    # Prepended to the connection adapter: structure.sql gets, after pg_dump's
    # output and Rails' INSERT INTO schema_migrations, the names
    # stagedrain_migrations records (pg_dump --schema-only copies no rows),
    # so the loaded database does not apply them again.
    module SqlDump
      def dump_schema_information
        names = Schema.applied_through(self) && select_values("SELECT name FROM stagedrain_migrations ORDER BY name")
        return super if names.nil? || names.empty?

        values = names.map { |n| "(#{quote(n)})" }.join(",\n")
        # Rails' own INSERT (or nil) ends in a blank line.
        "#{super}INSERT INTO stagedrain_migrations (name) VALUES\n#{values}\nON CONFLICT DO NOTHING;\n"
      end
    end
  end
end
