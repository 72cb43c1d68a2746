# frozen_string_literal: true

require "json"
require "open3"

module Stagedrain
  # `rails stagedrain:status`: runs the relay's `stagedrain status --json`
  # (STAGEDRAIN_BIN, else `stagedrain` on PATH) with the environment passed
  # through, prints a short verdict and returns status's own exit status:
  # 0 healthy, 1 needs attention, 2 bad usage.
  module Status
    # Where the relay reads its database from, in its own order; when none is
    # set, the app's database config fills libpq's PG* variables instead.
    PG_SETTINGS = %w[STAGEDRAIN_PG_URL STAGEDRAIN_PG_URL_FILE DATABASE_URL].freeze
    PG_VARS = {host: "PGHOST", port: "PGPORT", username: "PGUSER", password: "PGPASSWORD",
               database: "PGDATABASE", sslmode: "PGSSLMODE"}.freeze

    module_function

    # args go to `stagedrain status` as they are; db_config is the app's
    # database configuration (a Hash), or nil.
    def run(args = [], env: ENV, db_config: nil, out: $stdout, err: $stderr)
      bin = binary(env)
      json, status = Open3.capture2(child_env(env, db_config), bin, "status", "--json", *args)
      if (report = parse(json))
        summarize(report, out)
        return status.exitstatus || 2
      end
      # Bad usage: status said why on stderr.
      return 2 if status.exitstatus == 2

      err.puts "stagedrain: `#{bin} status --json` printed no report (#{status})"
      2
    rescue Error => e
      err.puts e.message
      2
    end

    # The relay's binary: STAGEDRAIN_BIN, else the first `stagedrain` on PATH.
    def binary(env)
      if (bin = env["STAGEDRAIN_BIN"].to_s) != ""
        return bin if File.file?(bin) && File.executable?(bin)

        raise Error, "stagedrain: STAGEDRAIN_BIN=#{bin} is not an executable file"
      end
      found = env["PATH"].to_s.split(File::PATH_SEPARATOR).map { |d| File.join(d, "stagedrain") }
                         .find { |f| File.file?(f) && File.executable?(f) }
      found or raise Error, "stagedrain: the relay's binary was not found: put `stagedrain` on PATH " \
                            "(make install does) or set STAGEDRAIN_BIN to its path"
    end

    def child_env(env, db_config)
      return {} if db_config.nil? || PG_SETTINGS.any? { |k| env[k].to_s != "" }

      PG_VARS.each_with_object({}) do |(key, var), vars|
        value = db_config[key] || db_config[key.to_s]
        vars[var] = value.to_s unless value.nil? || value.to_s.empty?
      end
    end

    def parse(json)
      report = JSON.parse(json)
      report.is_a?(Hash) && report.key?("healthy") ? report : nil
    rescue JSON::ParserError
      nil
    end

    # Prints the verdict, each problem, the backlog and the dead rows.
    def summarize(report, out)
      if report["healthy"]
        out.puts "stagedrain: healthy"
      else
        out.puts "stagedrain: needs attention:"
        Array(report["problems"]).each { |p| out.puts "  - #{p}" }
      end
      out.puts "  staged: #{report.dig("backlog", "staged") || "unknown"}"
      out.puts "  dead:   #{report.dig("dead", "rows") || "unknown"}"
    end

    class Error < StandardError; end
  end
end
