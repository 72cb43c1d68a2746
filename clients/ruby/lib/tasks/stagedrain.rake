# frozen_string_literal: true

namespace :stagedrain do
  desc "Ask the stagedrain relay whether it works (exit 0 healthy, 1 needs attention); " \
       "arguments go to `stagedrain status`: rails \"stagedrain:status[--max-age 1h]\""
  task status: :environment do |_task, args|
    require "shellwords"
    require "stagedrain/status"
    config = Stagedrain::StagedJob.connection_db_config.configuration_hash
    exit Stagedrain::Status.run(Shellwords.split(args.to_a.join(" ")), db_config: config)
  end
end
